/* recv flags: MSG_PEEK, MSG_WAITALL, MSG_DONTWAIT, MSG_TRUNC, on blocking and non-blocking
 * sockets, TCP and UDP. */
#include "common.h"

static int writer_fd;
static void *write_in_parts(void *arg) {
    (void)arg;
    for (int i = 0; i < 3; i++) {
        ms_sleep(40);
        write_full(writer_fd, "part", 4);
    }
    return NULL;
}

static void show_buf(const char *label, long n, const char *buf) {
    printf("%s = %ld data %.*s\n", label, n, n > 0 ? (int)n : 0, buf);
}

static void tcp(int nonblock) {
    printf("-- tcp nonblock %d\n", nonblock);
    int c, s;
    tcp_pair(AF_INET, &c, &s);
    if (nonblock) set_nonblocking(s, 1);
    char buf[64];
    SHOW("recv dontwait empty", recv(s, buf, sizeof buf, MSG_DONTWAIT));
    SHOW("recv peek dontwait empty", recv(s, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT));
    write_full(c, "hello world", 11);
    struct pollfd p = {s, POLLIN, 0};
    poll(&p, 1, 1000);
    errno = 4321;
    long peeked = recv(s, buf, 5, MSG_PEEK);
    printf("errno left alone by a call that succeeds %d\n", errno == 4321);
    show_buf("recv peek 5", peeked, buf);
    show_buf("recv peek all", recv(s, buf, sizeof buf, MSG_PEEK), buf);
    show_buf("recv 5", recv(s, buf, 5, 0), buf);
    SHOW("recv trunc 1", recv(s, NULL, 1, MSG_TRUNC));
    show_buf("recv dontwait", recv(s, buf, sizeof buf, MSG_DONTWAIT), buf);
    SHOW("recv dontwait drained", recv(s, buf, sizeof buf, MSG_DONTWAIT));

    /* MSG_WAITALL: three 4-byte parts come 40 ms apart; a blocking socket waits for all 12. */
    writer_fd = c;
    pthread_t t;
    pthread_create(&t, NULL, write_in_parts, NULL);
    long n = recv(s, buf, 12, MSG_WAITALL);
    if (nonblock) {
        printf("recv waitall on non-blocking: %s\n", n < 0 ? err_name(errno) : "data");
        pthread_join(t, NULL);
        n = read_full(s, buf, 12);
    } else {
        pthread_join(t, NULL);
    }
    show_buf("recv waitall", n, buf);
    /* recvmsg with WAITALL over two buffers. */
    write_full(c, "abcdef", 6);
    char a[4] = {0}, b[4] = {0};
    struct iovec iov[2] = {{a, 3}, {b, 3}};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
    SHOW("recvmsg waitall", recvmsg(s, &m, MSG_WAITALL));
    printf("parts %s %s flags %#x\n", a, b, m.msg_flags);
    /* The peer closes: WAITALL returns what there is. */
    write_full(c, "xy", 2);
    close(c);
    if (nonblock) { struct pollfd q = {s, POLLRDHUP, 0}; poll(&q, 1, 1000); }
    show_buf("recv waitall at eof", recv(s, buf, 10, MSG_WAITALL), buf);
    SHOW("recv eof", recv(s, buf, sizeof buf, 0));
    close(s);
}

static void udp(void) {
    printf("-- udp\n");
    int r = socket(AF_INET, SOCK_DGRAM, 0), w = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    bind(r, (void *)&a, sizeof a);
    getsockname(r, (void *)&a, &len);
    connect(w, (void *)&a, sizeof a);
    char buf[64];
    SHOW("recv dontwait empty", recv(r, buf, sizeof buf, MSG_DONTWAIT));
    send(w, "0123456789", 10, 0);
    send(w, "second", 6, 0);
    show_buf("recv peek 4", recv(r, buf, 4, MSG_PEEK), buf);
    show_buf("recv peek trunc 4", recv(r, buf, 4, MSG_PEEK | MSG_TRUNC), buf);
    show_buf("recv trunc 4", recv(r, buf, 4, MSG_TRUNC), buf);
    struct iovec iov = {buf, 3};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    SHOW("recvmsg 3", recvmsg(r, &m, 0));
    printf("msg_flags %#x data %.3s\n", m.msg_flags, buf);
    SHOW("recv dontwait drained", recv(r, buf, sizeof buf, MSG_DONTWAIT));
    set_nonblocking(r, 1);
    SHOW("recv nonblocking empty", recv(r, buf, sizeof buf, 0));
    SHOW("read nonblocking empty", read(r, buf, sizeof buf));
    send(w, "", 0, 0);
    SHOW("recv empty datagram", recv(r, buf, sizeof buf, 0));
    close(r);
    close(w);
}

int main(void) {
    setup();
    tcp(0);
    tcp(1);
    udp();
    printf("done\n");
    return 0;
}

/* The calls the uring lane carries beyond send/recv: sendto/recvfrom and sendmsg/recvmsg
 * with addresses, readv/writev, accept4 on non-blocking and blocking listeners, and a
 * blocking writev larger than the socket buffer (a short send the caller finishes).
 * Each mode prints "MODE ok" or the first thing that differs, and exits non-zero then. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define CHECK(cond, ...) do { if (!(cond)) { printf(__VA_ARGS__); printf("\n"); exit(1); } } while (0)

static struct sockaddr_in bound(int fd) {
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0, "bind errno %d", errno);
    getsockname(fd, (struct sockaddr *)&a, &len);
    return a;
}

static int udp(void) {
    int server = socket(AF_INET, SOCK_DGRAM, 0), client = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in s = bound(server), c = bound(client), from;
    socklen_t len = sizeof from;
    char buf[64];
    CHECK(sendto(client, "ping", 4, 0, (struct sockaddr *)&s, sizeof s) == 4, "sendto errno %d", errno);
    memset(&from, 0, sizeof from);
    ssize_t n = recvfrom(server, buf, sizeof buf, 0, (struct sockaddr *)&from, &len);
    CHECK(n == 4 && memcmp(buf, "ping", 4) == 0, "recvfrom %zd errno %d", n, errno);
    CHECK(len == sizeof from && from.sin_port == c.sin_port, "recvfrom address len %u port %u", len, ntohs(from.sin_port));
    /* A reply with an address and two pieces; received with an address. */
    struct iovec out[2] = { { "po", 2 }, { "ng", 2 } };
    struct msghdr m = { .msg_name = &from, .msg_namelen = len, .msg_iov = out, .msg_iovlen = 2 };
    CHECK(sendmsg(server, &m, 0) == 4, "sendmsg errno %d", errno);
    struct sockaddr_in peer;
    struct iovec in = { buf, sizeof buf };
    struct msghdr r = { .msg_name = &peer, .msg_namelen = sizeof peer, .msg_iov = &in, .msg_iovlen = 1 };
    n = recvmsg(client, &r, 0);
    CHECK(n == 4 && memcmp(buf, "pong", 4) == 0, "recvmsg %zd errno %d", n, errno);
    CHECK(r.msg_namelen == sizeof peer && peer.sin_port == s.sin_port, "recvmsg address");
    /* An address buffer too small: the address is cut, its whole length told. */
    CHECK(sendto(client, "again", 5, 0, (struct sockaddr *)&s, sizeof s) == 5, "sendto 2 errno %d", errno);
    len = 4;
    n = recvfrom(server, buf, sizeof buf, 0, (struct sockaddr *)&from, &len);
    CHECK(n == 5 && len == sizeof from, "short recvfrom %zd len %u", n, len);
    /* Nothing waiting on a non-blocking receiver: EAGAIN at once. */
    fcntl(server, F_SETFL, O_NONBLOCK);
    len = sizeof from;
    n = recvfrom(server, buf, sizeof buf, 0, (struct sockaddr *)&from, &len);
    CHECK(n == -1 && errno == EAGAIN, "empty recvfrom %zd errno %d", n, errno);
    printf("udp ok\n");
    return 0;
}

static void *drain(void *arg) {
    int fd = *(int *)arg;
    static char sink[65536];
    long total = 0;
    ssize_t n;
    while ((n = read(fd, sink, sizeof sink)) > 0)
        total += n;
    return (void *)total;
}

static int connected(const struct sockaddr_in *at) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(connect(fd, (const struct sockaddr *)at, sizeof *at) == 0, "connect errno %d", errno);
    return fd;
}

static int stream(void) {
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in at = bound(listener), peer;
    socklen_t len = sizeof peer;
    CHECK(listen(listener, 8) == 0, "listen");
    int fd = accept4(listener, (struct sockaddr *)&peer, &len, SOCK_CLOEXEC);
    CHECK(fd == -1 && errno == EAGAIN, "empty accept4 %d errno %d", fd, errno);
    int client = connected(&at);
    struct pollfd p = { listener, POLLIN, 0 };
    CHECK(poll(&p, 1, 5000) == 1, "poll listener");
    fd = accept4(listener, (struct sockaddr *)&peer, &len, SOCK_CLOEXEC);
    CHECK(fd >= 0, "accept4 errno %d", errno);
    CHECK(fcntl(fd, F_GETFD) == FD_CLOEXEC && len == sizeof peer && peer.sin_family == AF_INET, "accept4 flags/address");
    struct iovec out[2] = { { "vec", 3 }, { "tor", 3 } };
    CHECK(writev(client, out, 2) == 6, "writev errno %d", errno);
    char a[2], b[8];
    struct iovec in[2] = { { a, 2 }, { b, 4 } };
    ssize_t n = readv(fd, in, 2);
    CHECK(n == 6 && memcmp(a, "ve", 2) == 0 && memcmp(b, "ctor", 4) == 0, "readv %zd", n);
    /* A blocking listener with a connection waiting: accepted at once. */
    fcntl(listener, F_SETFL, 0);
    int second = connected(&at);
    int fd2 = accept(listener, NULL, NULL);
    CHECK(fd2 >= 0, "blocking accept errno %d", errno);
    /* A blocking writev bigger than the socket buffers: all of it, in order, as one call. */
    size_t big = 8 << 20;
    char *data = malloc(big);
    memset(data, 'x', big);
    pthread_t reader;
    pthread_create(&reader, NULL, drain, &fd2);
    struct iovec whole[2] = { { data, big / 2 }, { data + big / 2, big / 2 } };
    n = writev(second, whole, 2);
    CHECK(n == (ssize_t)big, "big writev %zd errno %d", n, errno);
    struct msghdr m = { .msg_iov = whole, .msg_iovlen = 2 };
    n = sendmsg(second, &m, 0);
    CHECK(n == (ssize_t)big, "big sendmsg %zd errno %d", n, errno);
    shutdown(second, SHUT_WR);
    void *total;
    pthread_join(reader, &total);
    CHECK((long)total == 2 * (long)big, "received %ld of %zu", (long)total, 2 * big);
    printf("stream ok\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "udp") == 0)
        return udp();
    if (argc > 1 && strcmp(argv[1], "stream") == 0)
        return stream();
    fprintf(stderr, "usage: carried udp|stream\n");
    return 2;
}

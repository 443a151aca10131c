/* SO_RCVTIMEO and SO_SNDTIMEO on blocking sockets: the call waits, then fails with EAGAIN
 * (a send that queued some bytes first returns their count). */
#include "common.h"

static void set_timeout(int fd, int opt, long ms) {
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    if (setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof tv)) die("setsockopt");
    socklen_t len = sizeof tv;
    getsockopt(fd, SOL_SOCKET, opt, &tv, &len);
    printf("%s %ld.%06ld\n", opt == SO_RCVTIMEO ? "rcvtimeo" : "sndtimeo", (long)tv.tv_sec, (long)tv.tv_usec);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Whether a call lasted at least the timeout (and not thirty times it): printed as a yes/no. */
static void waited(const char *label, double start, double secs) {
    double took = now() - start;
    printf("%s waited the timeout %d\n", label, took >= secs * 0.9 && took < secs * 30);
}

int main(void) {
    setup();
    int c, s;
    tcp_pair(AF_INET, &c, &s);
    char buf[64];
    set_timeout(s, SO_RCVTIMEO, 100);
    double t = now();
    SHOW("recv", recv(s, buf, sizeof buf, 0));
    waited("recv", t, 0.1);
    t = now();
    SHOW("read", read(s, buf, sizeof buf));
    waited("read", t, 0.1);
    struct iovec iov = {buf, sizeof buf};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    t = now();
    SHOW("recvmsg", recvmsg(s, &m, 0));
    waited("recvmsg", t, 0.1);
    SHOW("recv dontwait", recv(s, buf, sizeof buf, MSG_DONTWAIT));
    write_full(c, "data", 4);
    SHOW("recv with data", recv(s, buf, sizeof buf, 0));
    t = now();
    SHOW("recv waitall short", recv(s, buf, 4, MSG_WAITALL));
    waited("recv waitall", t, 0.1);

    /* accept honours SO_RCVTIMEO too. */
    int l = tcp_listener(AF_INET, 0);
    set_timeout(l, SO_RCVTIMEO, 100);
    t = now();
    SHOW("accept", accept(l, NULL, NULL));
    waited("accept", t, 0.1);

    /* UDP */
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(u, (void *)&a, sizeof a);
    set_timeout(u, SO_RCVTIMEO, 100);
    t = now();
    SHOW("recvfrom udp", recvfrom(u, buf, sizeof buf, 0, NULL, NULL));
    waited("recvfrom", t, 0.1);

    /* SO_SNDTIMEO: fill the peer's window (nobody reads) until a send times out. */
    int small = 4096;
    setsockopt(c, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    set_timeout(c, SO_SNDTIMEO, 100);
    static char chunk[16384];
    memset(chunk, 'z', sizeof chunk);
    long ret = 0;
    int err = 0, calls = 0;
    t = now();
    for (; calls < 10000; calls++) {
        errno = 0;
        ret = send(c, chunk, sizeof chunk, 0);
        err = errno;
        if (ret < 0) break;
    }
    printf("send until full: last %ld %s\n", ret, err_name(err));
    waited("send", t, 0.1);
    t = now();
    SHOW("write full", write(c, chunk, sizeof chunk));
    waited("write", t, 0.1);
    SHOW("send dontwait full", send(c, chunk, sizeof chunk, MSG_DONTWAIT));
    printf("done\n");
    return 0;
}

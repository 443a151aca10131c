/* shutdown and half-close: each direction alone, on TCP and unix stream sockets. */
#include "common.h"

static void pair(int tcp, int *c, int *s) {
    if (tcp) {
        tcp_pair(AF_INET, c, s);
    } else {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) die("socketpair");
        *c = sv[0];
        *s = sv[1];
    }
}

static void run(int tcp) {
    printf("-- %s\n", tcp ? "tcp" : "unix");
    int c, s;
    pair(tcp, &c, &s);
    char buf[64];
    write_full(c, "before", 6);
    SHOW("shutdown wr", shutdown(c, SHUT_WR));
    long n = read_full(s, buf, 6);
    printf("read = %ld data %.6s\n", n, buf);
    SHOW("recv eof", recv(s, buf, sizeof buf, 0));
    SHOW("read eof", read(s, buf, sizeof buf));
    SHOW("send after shut wr", send(c, "x", 1, MSG_NOSIGNAL));
    SHOW("write back", write(s, "reply", 5));
    n = read_full(c, buf, 5);
    printf("half-closed side reads = %ld data %.5s\n", n, buf);
    struct pollfd p = {s, POLLIN | POLLOUT | POLLRDHUP, 0};
    SHOW("poll", poll(&p, 1, 0));
    printf("revents %#x\n", p.revents);
    SHOW("shutdown rd", shutdown(c, SHUT_RD));
    SHOW("recv after shut rd", recv(c, buf, sizeof buf, MSG_DONTWAIT));
    SHOW("shutdown rdwr", shutdown(s, SHUT_RDWR));
    SHOW("send after rdwr", send(s, "x", 1, MSG_NOSIGNAL));
    SHOW("recv after rdwr", recv(s, buf, sizeof buf, 0));
    SHOW("shutdown bad how", shutdown(s, 7));
    close(c);
    close(s);
}

int main(void) {
    setup();
    run(1);
    run(0);
    int u = socket(AF_INET, SOCK_STREAM, 0);
    SHOW("shutdown unconnected", shutdown(u, SHUT_RDWR));
    SHOW("shutdown not a socket", shutdown(1, SHUT_RDWR));
    SHOW("shutdown bad fd", shutdown(999, SHUT_RDWR));
    /* A blocking reader wakes with EOF when the peer shuts its writing side. */
    int c, s;
    tcp_pair(AF_INET, &c, &s);
    if (fork() == 0) {
        ms_sleep(100);
        shutdown(c, SHUT_WR);
        _exit(0);
    }
    char buf[8];
    SHOW("blocked recv sees eof", recv(s, buf, sizeof buf, 0));
    wait(NULL);
    printf("done\n");
    return 0;
}

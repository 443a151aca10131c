/* Unix sockets: socketpair (stream, datagram, seqpacket), a bound stream listener, datagrams
 * between bound sockets with the sender's address, and message boundaries. */
#include "common.h"
#include <stddef.h>

static socklen_t abstract_name(struct sockaddr_un *a, const char *tag) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    /* A name of this run (the pid is in it, never printed). */
    int n = snprintf(a->sun_path + 1, sizeof a->sun_path - 1, "corelane-conformance-%d-%s", (int)getpid(), tag);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static void pair(int type, const char *label) {
    printf("-- socketpair %s\n", label);
    int sv[2];
    SHOW("socketpair", socketpair(AF_UNIX, type, 0, sv));
    printf("fds %d %d\n", sv[0], sv[1]);
    char buf[32] = {0};
    SHOW("send 3", send(sv[0], "one", 3, 0));
    SHOW("send 5", send(sv[0], "three", 5, 0));
    SHOW("recv 32", recv(sv[1], buf, sizeof buf, 0));
    printf("data %s\n", buf);
    memset(buf, 0, sizeof buf);
    SHOW("recv 2 dontwait", recv(sv[1], buf, 2, MSG_DONTWAIT));
    printf("data %s\n", buf);
    SHOW("recv dontwait", recv(sv[1], buf, sizeof buf, MSG_DONTWAIT));
    SHOW("write", write(sv[1], "back", 4));
    memset(buf, 0, sizeof buf);
    SHOW("read", read(sv[0], buf, sizeof buf));
    printf("data %s\n", buf);
    struct sockaddr_un from;
    socklen_t len = sizeof from;
    send(sv[0], "x", 1, 0);
    SHOW("recvfrom", recvfrom(sv[1], buf, sizeof buf, 0, (void *)&from, &len));
    printf("from len %u\n", (unsigned)len);
    close(sv[0]);
    SHOW("recv after peer closed", recv(sv[1], buf, sizeof buf, MSG_DONTWAIT));
    SHOW("send after peer closed", send(sv[1], "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT));
    close(sv[1]);
}

int main(void) {
    setup();
    pair(SOCK_STREAM, "stream");
    pair(SOCK_DGRAM, "dgram");
    pair(SOCK_SEQPACKET, "seqpacket");

    printf("-- stream listener\n");
    struct sockaddr_un name;
    socklen_t nlen = abstract_name(&name, "stream");
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    SHOW("bind", bind(l, (void *)&name, nlen));
    SHOW("listen", listen(l, 4));
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    SHOW("connect", connect(c, (void *)&name, nlen));
    struct sockaddr_un peer;
    socklen_t plen = sizeof peer;
    int s = accept4(l, (void *)&peer, &plen, SOCK_NONBLOCK);
    printf("accepted %d peer len %u nonblock %d\n", s, (unsigned)plen, nonblocking(s));
    char buf[64] = {0};
    SHOW("recv empty", recv(s, buf, sizeof buf, 0));
    SHOW("send", send(c, "stream data", 11, 0));
    SHOW("recv", recv(s, buf, sizeof buf, 0));
    printf("data %s\n", buf);
    int c2 = socket(AF_UNIX, SOCK_STREAM, 0);
    SHOW("bind name taken", bind(c2, (void *)&name, nlen));
    close(c2);
    close(c);
    close(s);

    printf("-- bound datagrams\n");
    struct sockaddr_un an, bn;
    socklen_t alen = abstract_name(&an, "a"), blen = abstract_name(&bn, "b");
    int a = socket(AF_UNIX, SOCK_DGRAM, 0), b = socket(AF_UNIX, SOCK_DGRAM, 0);
    bind(a, (void *)&an, alen);
    bind(b, (void *)&bn, blen);
    SHOW("sendto", sendto(a, "hello b", 7, 0, (void *)&bn, blen));
    struct sockaddr_un from;
    socklen_t flen = sizeof from;
    memset(buf, 0, sizeof buf);
    SHOW("recvfrom", recvfrom(b, buf, sizeof buf, 0, (void *)&from, &flen));
    printf("data %s from a %d\n", buf, flen == alen && !memcmp(&from, &an, alen));
    struct iovec iov = {buf, sizeof buf};
    struct msghdr m = {.msg_name = &bn, .msg_namelen = blen, .msg_iov = &iov, .msg_iovlen = 1};
    strcpy(buf, "via sendmsg");
    iov.iov_len = 11;
    SHOW("sendmsg", sendmsg(a, &m, 0));
    memset(buf, 0, sizeof buf);
    iov.iov_len = sizeof buf;
    struct sockaddr_un from2;
    m = (struct msghdr){.msg_name = &from2, .msg_namelen = sizeof from2, .msg_iov = &iov, .msg_iovlen = 1};
    SHOW("recvmsg", recvmsg(b, &m, 0));
    printf("data %s from a %d\n", buf, m.msg_namelen == alen && !memcmp(&from2, &an, alen));
    int un = socket(AF_UNIX, SOCK_DGRAM, 0);
    SHOW("sendto from unbound", sendto(un, "anon", 4, 0, (void *)&bn, blen));
    flen = sizeof from;
    SHOW("recvfrom", recvfrom(b, buf, sizeof buf, 0, (void *)&from, &flen));
    printf("from len %u\n", (unsigned)flen);
    SHOW("connect a to b", connect(a, (void *)&bn, blen));
    SHOW("send connected", send(a, "conn", 4, 0));
    SHOW("recv", recv(b, buf, sizeof buf, 0));
    close(b);
    SHOW("send to a closed peer", send(a, "x", 1, 0));
    SHOW("sendto nobody", sendto(un, "x", 1, 0, (void *)&bn, blen));
    printf("done\n");
    return 0;
}

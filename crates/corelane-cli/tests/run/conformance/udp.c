/* UDP with addresses: sendto/recvfrom, sendmsg/recvmsg with msg_name, sendmmsg/recvmmsg, on
 * blocking and non-blocking sockets; connected UDP and the ICMP error it then reports. */
#include "common.h"

static int bound(void) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || bind(fd, (void *)&a, sizeof a)) die("bind");
    return fd;
}

static struct sockaddr_in name_of(int fd) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    getsockname(fd, (void *)&a, &len);
    return a;
}

static void from(const char *label, struct sockaddr_in *a, socklen_t len, int sender) {
    printf("%s from %s len %u port is the sender's %d\n", label, addr_text((void *)a, len), (unsigned)len,
           port_of((void *)a) == local_port(sender));
}

static void run(int nonblock) {
    printf("-- nonblock %d\n", nonblock);
    int r = bound(), w = bound();
    if (nonblock) {
        set_nonblocking(r, 1);
        set_nonblocking(w, 1);
    }
    struct sockaddr_in ra = name_of(r);
    char buf[64] = {0};
    struct sockaddr_in src;
    socklen_t len = sizeof src;
    SHOW("sendto", sendto(w, "first", 5, 0, (void *)&ra, sizeof ra));
    SHOW("recvfrom", recvfrom(r, buf, sizeof buf, 0, (void *)&src, &len));
    from(" recvfrom", &src, len, w);
    printf(" data %s\n", buf);
    len = 4; /* too short: truncated, the full length reported */
    memset(&src, 0, sizeof src);
    sendto(w, "short", 5, 0, (void *)&ra, sizeof ra);
    SHOW("recvfrom short name", recvfrom(r, buf, sizeof buf, 0, (void *)&src, &len));
    printf(" len %u family %d\n", (unsigned)len, src.sin_family);
    if (nonblock) SHOW("recvfrom empty", recvfrom(r, buf, sizeof buf, 0, (void *)&src, &len));

    struct iovec iov[2] = {{"via ", 4}, {"sendmsg", 7}};
    struct msghdr m = {.msg_name = &ra, .msg_namelen = sizeof ra, .msg_iov = iov, .msg_iovlen = 2};
    SHOW("sendmsg", sendmsg(w, &m, 0));
    memset(buf, 0, sizeof buf);
    struct iovec in = {buf, sizeof buf};
    struct sockaddr_in mname;
    struct msghdr got = {.msg_name = &mname, .msg_namelen = sizeof mname, .msg_iov = &in, .msg_iovlen = 1};
    SHOW("recvmsg", recvmsg(r, &got, 0));
    from(" recvmsg", &mname, got.msg_namelen, w);
    printf(" data %s flags %#x\n", buf, got.msg_flags);

    /* sendmmsg: three datagrams to r, each with its address; recvmmsg takes them back. */
    char *texts[3] = {"m-one", "m-two", "m-three"};
    struct mmsghdr out[3];
    struct iovec oiov[3];
    for (int i = 0; i < 3; i++) {
        oiov[i] = (struct iovec){texts[i], strlen(texts[i])};
        out[i] = (struct mmsghdr){.msg_hdr = {.msg_name = &ra, .msg_namelen = sizeof ra, .msg_iov = &oiov[i], .msg_iovlen = 1}};
    }
    SHOW("sendmmsg", sendmmsg(w, out, 3, 0));
    for (int i = 0; i < 3; i++) printf(" msg_len %u\n", out[i].msg_len);
    char bufs[4][16];
    struct iovec iiov[4];
    struct sockaddr_in names[4];
    struct mmsghdr inm[4];
    memset(bufs, 0, sizeof bufs);
    for (int i = 0; i < 4; i++) {
        iiov[i] = (struct iovec){bufs[i], sizeof bufs[i]};
        inm[i] = (struct mmsghdr){.msg_hdr = {.msg_name = &names[i], .msg_namelen = sizeof names[i], .msg_iov = &iiov[i], .msg_iovlen = 1}};
    }
    struct pollfd p = {r, POLLIN, 0};
    poll(&p, 1, 1000);
    SHOW("recvmmsg", recvmmsg(r, inm, 4, MSG_DONTWAIT, NULL));
    for (int i = 0; i < 3; i++) {
        printf(" [%d] len %u %s", i, inm[i].msg_len, bufs[i]);
        from("", &names[i], inm[i].msg_hdr.msg_namelen, w);
    }
    SHOW("recvmmsg empty", recvmmsg(r, inm, 4, MSG_DONTWAIT, NULL));

    /* Connected UDP: send/recv without addresses; a datagram to a port nobody holds comes back
     * as ECONNREFUSED on the next call. */
    SHOW("connect", connect(w, (void *)&ra, sizeof ra));
    SHOW("send", send(w, "conn", 4, 0));
    SHOW("recv", recv(r, buf, sizeof buf, 0));
    SHOW("write", write(w, "wr", 2));
    SHOW("read", read(r, buf, sizeof buf));
    int gone = bound();
    struct sockaddr_in ga = name_of(gone);
    close(gone);
    int lone = bound();
    if (nonblock) set_nonblocking(lone, 1);
    SHOW("connect to closed port", connect(lone, (void *)&ga, sizeof ga));
    SHOW("send to closed port", send(lone, "x", 1, 0));
    p = (struct pollfd){lone, POLLIN, 0};
    poll(&p, 1, 1000);
    printf(" revents %#x\n", p.revents);
    SHOW("recv after refusal", recv(lone, buf, sizeof buf, 0));
    SHOW("recv again", recv(lone, buf, sizeof buf, MSG_DONTWAIT));
    SHOW("sendto on connected with another address", sendto(lone, "y", 1, 0, (void *)&ra, sizeof ra));
    SHOW("recvfrom", recvfrom(r, buf, sizeof buf, 0, NULL, NULL));
    SHOW("sendto bad address length", sendto(w, "z", 1, 0, (void *)&ra, 3));
    close(lone);
    close(r);
    close(w);
}

int main(void) {
    setup();
    run(0);
    run(1);
    printf("done\n");
    return 0;
}

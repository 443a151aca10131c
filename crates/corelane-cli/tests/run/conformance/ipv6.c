/* IPv6 on ::1: TCP (blocking and non-blocking) and UDP, the addresses the calls return, and
 * an IPv4-mapped peer on a dual-stack socket. */
#include "common.h"

static void show_name(const char *label, int fd, int peer) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int r = peer ? getpeername(fd, (void *)&ss, &len) : getsockname(fd, (void *)&ss, &len);
    printf("%s: %d %s len %u\n", label, r, r ? err_name(errno) : addr_text((void *)&ss, len), (unsigned)len);
}

int main(void) {
    setup();
    int probe = socket(AF_INET6, SOCK_DGRAM, 0);
    struct sockaddr_in6 lo = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    if (probe < 0 || bind(probe, (void *)&lo, sizeof lo)) {
        printf("no ::1: %s\n", err_name(errno));
        return 0;
    }
    close(probe);
    printf("-- tcp\n");
    int l = tcp_listener(AF_INET6, 0);
    show_name("listener", l, 0);
    int c = tcp_connect_to(l);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int s = accept(l, (void *)&ss, &len);
    printf("accepted %d peer %s len %u port same %d\n", s, addr_text((void *)&ss, len), (unsigned)len,
           port_of((void *)&ss) == local_port(c));
    show_name("client peer", c, 1);
    char buf[32] = {0};
    SHOW("send", send(c, "six", 3, 0));
    SHOW("recv", recv(s, buf, sizeof buf, 0));
    SHOW("write", write(s, "back", 4));
    SHOW("read", read_full(c, buf, 4));
    printf("data %.4s\n", buf);
    set_nonblocking(s, 1);
    SHOW("recv nonblocking empty", recv(s, buf, sizeof buf, 0));
    close(c);
    struct pollfd p = {s, POLLIN, 0};
    poll(&p, 1, 1000);
    SHOW("recv eof", recv(s, buf, sizeof buf, 0));
    close(s);

    /* A non-blocking connect to ::1. */
    int nc = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK, 0);
    len = sizeof ss;
    getsockname(l, (void *)&ss, &len);
    errno = 0;
    int r = connect(nc, (void *)&ss, len);
    printf("nonblocking connect %s\n", r == 0 || errno == EINPROGRESS ? "started" : err_name(errno));
    p = (struct pollfd){nc, POLLOUT, 0};
    poll(&p, 1, 1000);
    int err = -1;
    socklen_t elen = sizeof err;
    getsockopt(nc, SOL_SOCKET, SO_ERROR, &err, &elen);
    printf("connected so_error %d revents %#x\n", err, p.revents);
    SHOW("connect again", connect(nc, (void *)&ss, len));
    int a = accept(l, NULL, NULL);
    SHOW("send", send(nc, "nb", 2, 0));
    SHOW("recv", recv(a, buf, sizeof buf, 0));
    close(a);
    close(nc);

    /* Connection refused on a closed port. */
    int port_holder = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 free_port = lo;
    bind(port_holder, (void *)&free_port, sizeof free_port);
    len = sizeof free_port;
    getsockname(port_holder, (void *)&free_port, &len);
    int rc = socket(AF_INET6, SOCK_STREAM, 0);
    SHOW("connect refused", connect(rc, (void *)&free_port, sizeof free_port));
    close(rc);
    close(port_holder);

    printf("-- udp\n");
    int u1 = socket(AF_INET6, SOCK_DGRAM, 0), u2 = socket(AF_INET6, SOCK_DGRAM, 0);
    bind(u1, (void *)&lo, sizeof lo);
    bind(u2, (void *)&lo, sizeof lo);
    struct sockaddr_in6 a1;
    len = sizeof a1;
    getsockname(u1, (void *)&a1, &len);
    SHOW("sendto", sendto(u2, "dgram6", 6, 0, (void *)&a1, sizeof a1));
    len = sizeof ss;
    memset(buf, 0, sizeof buf);
    SHOW("recvfrom", recvfrom(u1, buf, sizeof buf, 0, (void *)&ss, &len));
    printf("from %s len %u port same %d data %s\n", addr_text((void *)&ss, len), (unsigned)len,
           port_of((void *)&ss) == local_port(u2), buf);
    SHOW("sendto reply", sendto(u1, "r", 1, 0, (void *)&ss, len));
    SHOW("recv reply", recv(u2, buf, sizeof buf, 0));

    printf("-- dual stack\n");
    int d = socket(AF_INET6, SOCK_DGRAM, 0);
    int off = 0;
    setsockopt(d, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    struct sockaddr_in6 any = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT};
    bind(d, (void *)&any, sizeof any);
    int v4 = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(local_port(d)), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    SHOW("sendto v4", sendto(v4, "mapped", 6, 0, (void *)&to, sizeof to));
    len = sizeof ss;
    memset(buf, 0, sizeof buf);
    SHOW("recvfrom v6", recvfrom(d, buf, sizeof buf, 0, (void *)&ss, &len));
    printf("from %s len %u data %s\n", addr_text((void *)&ss, len), (unsigned)len, buf);
    printf("done\n");
    return 0;
}

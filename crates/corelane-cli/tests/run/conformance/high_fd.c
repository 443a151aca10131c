/* Descriptors above 65,536: RLIMIT_NOFILE raised, a socket dup2'd to 70000 and used there
 * (send, recv, poll, epoll, accept on a listener at 70001). Without the right to raise the
 * hard limit, the same just below it (printed: "above 65536 0"). */
#include "common.h"
#include <sys/epoll.h>
#include <sys/resource.h>

int main(void) {
    setup();
    struct rlimit rl = {80000, 80000};
    int high = 70000;
    if (setrlimit(RLIMIT_NOFILE, &rl)) {
        getrlimit(RLIMIT_NOFILE, &rl);
        rl.rlim_cur = rl.rlim_max;
        if (rl.rlim_max < 2000 || setrlimit(RLIMIT_NOFILE, &rl)) {
            printf("cannot raise RLIMIT_NOFILE: %s\n", err_name(errno));
            return 0;
        }
        high = (int)(rl.rlim_max > 70100 ? 70000 : rl.rlim_max - 100);
    }
    printf("above 65536 %d\n", high > 65536);
    int c, s;
    tcp_pair(AF_INET, &c, &s);
    printf("dup2 to high returned it %d\n", dup2(s, high) == high);
    SHOW("close original", close(s));
    char buf[16] = {0};
    write_full(c, "high", 4);
    struct pollfd p = {high, POLLIN, 0};
    SHOW("poll high", poll(&p, 1, 1000));
    printf("revents %#x\n", p.revents);
    SHOW("recv high", recv(high, buf, sizeof buf, 0));
    printf("data %s\n", buf);
    SHOW("send high", send(high, "back", 4, 0));
    SHOW("write high", write(high, "more", 4));
    memset(buf, 0, sizeof buf);
    printf("peer read %ld %s\n", read_full(c, buf, 8), buf);
    set_nonblocking(high, 1);
    SHOW("recv high empty", recv(high, buf, sizeof buf, 0));
    SHOW("read high empty", read(high, buf, sizeof buf));
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = high}, out;
    SHOW("epoll add high", epoll_ctl(ep, EPOLL_CTL_ADD, high, &ev));
    write_full(c, "x", 1);
    SHOW("epoll_wait", epoll_wait(ep, &out, 1, 1000));
    printf("event is high %d events %#x\n", out.data.fd == high, out.events);
    SHOW("read high", read(high, buf, sizeof buf));

    int l = tcp_listener(AF_INET, 0);
    printf("dup2 listener to high+1 returned it %d\n", dup2(l, high + 1) == high + 1);
    close(l);
    int cc = tcp_connect_to(high + 1);
    int a = accept(high + 1, NULL, NULL);
    printf("accepted %d (the lowest free)\n", a);
    SHOW("send accepted", send(cc, "acc", 3, 0));
    SHOW("recv accepted", recv(a, buf, sizeof buf, 0));
    printf("dup2 accepted to high-1 returned it %d\n", dup2(a, high - 1) == high - 1);
    SHOW("send high - 1", send(high - 1, "dup", 3, 0));
    SHOW("recv peer", recv(cc, buf, sizeof buf, 0));
    SHOW("close high", close(high));
    SHOW("recv closed high", recv(high, buf, sizeof buf, 0));
    SHOW("peer recv eof", recv(c, buf, sizeof buf, 0));
    SHOW("dup2 above the limit", dup2(c, (int)rl.rlim_cur + 10));
    int next = socket(AF_INET, SOCK_DGRAM, 0);
    printf("next socket %d\n", next);
    printf("done\n");
    return 0;
}

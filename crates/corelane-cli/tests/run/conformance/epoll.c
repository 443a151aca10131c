/* epoll: level- and edge-triggered, one-shot, exclusive, and an epoll fd inside another. */
#include "common.h"
#include <sys/epoll.h>

static void wait_show(const char *label, int ep, int timeout) {
    struct epoll_event evs[8];
    errno = 0;
    int n = epoll_wait(ep, evs, 8, timeout);
    if (n < 0) {
        printf("%s: -1 %s\n", label, err_name(errno));
        return;
    }
    printf("%s: %d", label, n);
    for (int i = 0; i < n; i++) printf(" [data %llu events %#x]", (unsigned long long)evs[i].data.u64, evs[i].events);
    printf("\n");
}

int main(void) {
    setup();
    int c, s;
    tcp_pair(AF_INET, &c, &s);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    printf("epoll fd %d cloexec %d\n", ep, cloexec(ep));
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 7};
    SHOW("ctl add", epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev));
    SHOW("ctl add again", epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev));
    SHOW("ctl bad fd", epoll_ctl(ep, EPOLL_CTL_ADD, 999, &ev));
    wait_show("lt empty", ep, 0);
    wait_show("lt empty 50ms", ep, 50);
    write_full(c, "abc", 3);
    wait_show("lt ready", ep, 1000);
    wait_show("lt still ready", ep, 0);
    char buf[64] = {0};
    SHOW("recv", recv(s, buf, sizeof buf, 0));
    printf("data %s\n", buf);
    wait_show("lt drained", ep, 0);

    ev.events = EPOLLIN | EPOLLET;
    SHOW("ctl mod et", epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev));
    send(c, "de", 2, 0);
    wait_show("et edge", ep, 1000);
    wait_show("et no new edge", ep, 0);
    send(c, "f", 1, 0);
    wait_show("et new edge", ep, 1000);
    memset(buf, 0, sizeof buf);
    SHOW("read", read(s, buf, sizeof buf));
    printf("data %s\n", buf);

    ev.events = EPOLLIN | EPOLLONESHOT;
    SHOW("ctl mod oneshot", epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev));
    send(c, "g", 1, 0);
    wait_show("oneshot fires", ep, 1000);
    send(c, "h", 1, 0);
    wait_show("oneshot disarmed", ep, 0);
    SHOW("ctl rearm", epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev));
    wait_show("oneshot rearmed", ep, 1000);
    memset(buf, 0, sizeof buf);
    SHOW("recv", recv(s, buf, sizeof buf, MSG_DONTWAIT));
    printf("data %s\n", buf);

    ev.events = EPOLLOUT;
    ev.data.u64 = 8;
    SHOW("ctl add out", epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
    wait_show("in and out", ep, 0);
    SHOW("ctl del", epoll_ctl(ep, EPOLL_CTL_DEL, c, NULL));
    SHOW("ctl del again", epoll_ctl(ep, EPOLL_CTL_DEL, c, NULL));

    /* EPOLLEXCLUSIVE on a listener watched by two epolls. */
    int l = tcp_listener(AF_INET, SOCK_NONBLOCK);
    int ep2 = epoll_create1(0), ep3 = epoll_create1(0);
    struct epoll_event ex = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.u64 = 9};
    SHOW("ctl exclusive ep2", epoll_ctl(ep2, EPOLL_CTL_ADD, l, &ex));
    SHOW("ctl exclusive ep3", epoll_ctl(ep3, EPOLL_CTL_ADD, l, &ex));
    SHOW("ctl mod exclusive", epoll_ctl(ep2, EPOLL_CTL_MOD, l, &ex));
    wait_show("exclusive empty", ep2, 0);
    int c2 = tcp_connect_to(l);
    wait_show("exclusive ep2", ep2, 1000);
    wait_show("exclusive ep3", ep3, 1000);
    int a = accept(l, NULL, NULL);
    printf("accepted %d\n", a >= 0);
    wait_show("exclusive drained", ep2, 0);
    SHOW("accept empty", accept(l, NULL, NULL));

    /* An epoll inside another: the outer reports the inner readable while it has events. */
    ev.events = EPOLLIN;
    SHOW("ctl mod lt", epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev));
    int outer = epoll_create1(0);
    struct epoll_event in = {.events = EPOLLIN, .data.u64 = 10};
    SHOW("ctl nest", epoll_ctl(outer, EPOLL_CTL_ADD, ep, &in));
    SHOW("ctl loop", epoll_ctl(ep, EPOLL_CTL_ADD, outer, &in));
    wait_show("outer idle", outer, 0);
    send(c, "i", 1, 0);
    wait_show("outer ready", outer, 1000);
    wait_show("inner ready", ep, 0);

    /* Hang-up: the peer closes. */
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = 7;
    SHOW("ctl mod rdhup", epoll_ctl(ep, EPOLL_CTL_MOD, s, &ev));
    close(c);
    ms_sleep(20);
    wait_show("peer closed", ep, 1000);
    memset(buf, 0, sizeof buf);
    SHOW("recv rest", recv(s, buf, sizeof buf, 0));
    printf("data %s\n", buf);
    SHOW("recv eof", recv(s, buf, sizeof buf, 0));
    SHOW("epoll_wait bad fd", epoll_wait(s, (struct epoll_event *)buf, 1, 0));
    SHOW("epoll_wait bad max", epoll_wait(ep, (struct epoll_event *)buf, 0, 0));
    close(c2);
    close(a);
    printf("done\n");
    return 0;
}

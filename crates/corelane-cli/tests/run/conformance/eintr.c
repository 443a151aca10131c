/* EINTR: a blocking call interrupted by a timer's signal, with and without SA_RESTART. The
 * timer fires at 100 ms; a thread writes the data at 300 ms. Per signal(7): recv, read,
 * accept restart under SA_RESTART; poll, epoll_wait, select and a recv with SO_RCVTIMEO
 * never do. */
#include "common.h"
#include <sys/epoll.h>
#include <sys/select.h>

static volatile sig_atomic_t caught;
static void on_timer(int sig) { (void)sig; caught++; }

static int peer;
static void *write_late(void *arg) {
    (void)arg;
    ms_sleep(300);
    write_full(peer, "late", 4);
    return NULL;
}

/* The writer thread never takes the signal: it starts with SIGUSR1 blocked. */
static void start_writer(pthread_t *t) {
    sigset_t usr1, old;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, &old);
    pthread_create(t, NULL, write_late, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static int select_one(int fd) {
    fd_set r;
    FD_ZERO(&r);
    FD_SET(fd, &r);
    return select(fd + 1, &r, NULL, NULL, NULL);
}

static timer_t timer;
static void arm(void) {
    struct itimerspec its = {.it_value = {0, 100 * 1000000}};
    timer_settime(timer, 0, &its, NULL);
}

static void handler(int restart) {
    struct sigaction sa = {.sa_handler = on_timer, .sa_flags = restart ? SA_RESTART : 0};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
}

/* One call that blocks, the timer armed, the data written later by a thread. */
#define INTERRUPTED(label, fd, expr)                                          \
    do {                                                                      \
        int c_, s_;                                                           \
        tcp_pair(AF_INET, &c_, &s_);                                          \
        int fd = s_;                                                          \
        peer = c_;                                                            \
        pthread_t t_;                                                         \
        start_writer(&t_);                                                    \
        caught = 0;                                                           \
        arm();                                                                \
        SHOW(label, expr);                                                    \
        printf("  caught %d\n", (int)caught);                                 \
        pthread_join(t_, NULL);                                               \
        close(c_);                                                            \
        close(s_);                                                            \
    } while (0)

int main(void) {
    setup();
    struct sigevent sev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR1};
    if (timer_create(CLOCK_MONOTONIC, &sev, &timer)) die("timer_create");
    for (int restart = 0; restart < 2; restart++) {
        printf("-- SA_RESTART %d\n", restart);
        handler(restart);
        char buf[16];
        INTERRUPTED("recv", fd, recv(fd, buf, sizeof buf, 0));
        INTERRUPTED("read", fd, read(fd, buf, sizeof buf));
        INTERRUPTED("recv waitall", fd, recv(fd, buf, 4, MSG_WAITALL));
        struct iovec iov = {buf, sizeof buf};
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
        INTERRUPTED("recvmsg", fd, recvmsg(fd, &m, 0));
        struct pollfd p = {0, POLLIN, 0};
        INTERRUPTED("poll", fd, (p.fd = fd, poll(&p, 1, 2000)));
        INTERRUPTED("ppoll", fd, (p.fd = fd, ppoll(&p, 1, NULL, NULL)));
        INTERRUPTED("select", fd, select_one(fd));
        int ep = epoll_create1(0);
        struct epoll_event ev = {.events = EPOLLIN}, out;
        INTERRUPTED("epoll_wait", fd, (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), epoll_wait(ep, &out, 1, 2000)));
        close(ep);
        struct timeval tv = {2, 0};
        INTERRUPTED("recv with rcvtimeo", fd, (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), recv(fd, buf, sizeof buf, 0)));
        /* accept: nobody connects; without SA_RESTART it fails, with it it waits again (a
         * second timer shot, then a connection from a thread, ends it). */
        int l = tcp_listener(AF_INET, 0);
        caught = 0;
        arm();
        if (restart) {
            if (fork() == 0) {
                ms_sleep(300);
                close(tcp_connect_to(l));
                _exit(0);
            }
        }
        int a = accept(l, NULL, NULL);
        printf("accept %s caught %d\n", a >= 0 ? "connected" : err_name(errno), (int)caught);
        if (restart) wait(NULL);
        if (a >= 0) close(a);
        close(l);
    }
    printf("done\n");
    return 0;
}

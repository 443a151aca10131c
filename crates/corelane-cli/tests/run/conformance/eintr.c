/* EINTR: a blocking call interrupted by a timer's signal, with and without SA_RESTART. A
 * helper thread arms the timer (1 ms) once the main thread is blocked in the call itself (its
 * /proc/self/task/TID/syscall names the call), so the signal always comes during the wait,
 * however long a lane takes to get there; the data comes 50 ms after the handler ran. Per
 * signal(7): recv, read, recvmsg and accept restart under SA_RESTART; poll, ppoll, select,
 * epoll_wait and a recv with SO_RCVTIMEO never do. */
#include "common.h"
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>

static volatile sig_atomic_t caught;
static void on_timer(int sig) { (void)sig; caught++; }

static timer_t timer;
static pid_t main_tid;

/* Whether the main thread is blocked in one of the calls this program interrupts. */
static int main_blocked(void) {
    static const long calls[] = {
        SYS_read, SYS_recvfrom, SYS_recvmsg, SYS_ppoll, SYS_pselect6, SYS_epoll_pwait,
        SYS_accept, SYS_accept4,
#ifdef SYS_poll
        SYS_poll,
#endif
#ifdef SYS_select
        SYS_select,
#endif
#ifdef SYS_epoll_wait
        SYS_epoll_wait,
#endif
#ifdef SYS_epoll_pwait2
        SYS_epoll_pwait2,
#endif
    };
    char path[64], line[256] = {0};
    snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)main_tid);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    int got = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!got || line[0] < '0' || line[0] > '9') return 0; /* "running", or -1: no call */
    long nr = strtol(line, NULL, 10);
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
        if (nr == calls[i]) return 1;
    return 0;
}

/* Arms the timer once the main thread blocks (at most 5 s). */
static void *signal_when_blocked(void *arg) {
    (void)arg;
    for (int i = 0; i < 5000 && !main_blocked(); i++) ms_sleep(1);
    struct itimerspec its = {.it_value = {0, 1000000}};
    timer_settime(timer, 0, &its, NULL);
    return NULL;
}

/* Waits (at most 5 s) for the handler to have run, then 50 ms more. */
static void after_the_signal(void) {
    for (int i = 0; i < 5000 && !caught; i++) ms_sleep(1);
    ms_sleep(50);
}

static int peer;
static void *write_after_signal(void *arg) {
    (void)arg;
    after_the_signal();
    write_full(peer, "late", 4);
    return NULL;
}

static int listener;
static void *connect_after_signal(void *arg) {
    (void)arg;
    after_the_signal();
    close(tcp_connect_to(listener));
    return NULL;
}

/* A helper thread that never takes the signal: it starts with SIGUSR1 blocked. */
static pthread_t helper(void *(*fn)(void *)) {
    sigset_t usr1, old;
    pthread_t t;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, &old);
    pthread_create(&t, NULL, fn, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return t;
}

static void handler(int restart) {
    struct sigaction sa = {.sa_handler = on_timer, .sa_flags = restart ? SA_RESTART : 0};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
}

static int select_one(int fd) {
    fd_set r;
    FD_ZERO(&r);
    FD_SET(fd, &r);
    return select(fd + 1, &r, NULL, NULL, NULL);
}

/* One call that blocks on a fresh TCP connection: the signal comes while it waits, the data
 * after the handler ran. */
#define INTERRUPTED(label, fd, expr)                                          \
    do {                                                                      \
        int c_, s_;                                                           \
        tcp_pair(AF_INET, &c_, &s_);                                          \
        int fd = s_;                                                          \
        peer = c_;                                                            \
        caught = 0;                                                           \
        pthread_t w_ = helper(write_after_signal);                            \
        pthread_t t_ = helper(signal_when_blocked);                           \
        SHOW(label, expr);                                                    \
        printf("  caught %d\n", (int)caught);                                 \
        pthread_join(t_, NULL);                                               \
        pthread_join(w_, NULL);                                               \
        close(c_);                                                            \
        close(s_);                                                            \
    } while (0)

int main(void) {
    setup();
    main_tid = gettid();
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
        INTERRUPTED("poll", fd, (p.fd = fd, poll(&p, 1, 5000)));
        INTERRUPTED("ppoll", fd, (p.fd = fd, ppoll(&p, 1, NULL, NULL)));
        INTERRUPTED("select", fd, select_one(fd));
        int ep = epoll_create1(0);
        struct epoll_event ev = {.events = EPOLLIN}, out;
        INTERRUPTED("epoll_wait", fd, (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev), epoll_wait(ep, &out, 1, 5000)));
        close(ep);
        struct timeval tv = {5, 0};
        INTERRUPTED("recv with rcvtimeo", fd, (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), recv(fd, buf, sizeof buf, 0)));
        /* accept: a connection comes only after the handler ran. */
        listener = tcp_listener(AF_INET, 0);
        caught = 0;
        pthread_t c = helper(connect_after_signal), t = helper(signal_when_blocked);
        int a = accept(listener, NULL, NULL);
        printf("accept %s caught %d\n", a >= 0 ? "connected" : err_name(errno), (int)caught);
        pthread_join(t, NULL);
        pthread_join(c, NULL);
        if (a >= 0) close(a);
        close(listener);
    }
    printf("done\n");
    return 0;
}

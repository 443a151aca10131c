/* poll, ppoll, select, pselect: what is ready, timeouts, and the fd_sets the kernel leaves. */
#include "common.h"
#include <sys/select.h>

static void show_set(const char *name, fd_set *set, int nfds) {
    printf(" %s{", name);
    for (int fd = 0; fd < nfds; fd++)
        if (FD_ISSET(fd, set)) printf(" %d", fd);
    printf(" }");
}

static void poll_show(const char *label, struct pollfd *p, int n, int timeout) {
    for (int i = 0; i < n; i++) p[i].revents = 0x7777;
    errno = 0;
    int r = poll(p, n, timeout);
    int e = errno;
    printf("%s: %d%s%s", label, r, r < 0 ? " " : "", r < 0 ? err_name(e) : "");
    for (int i = 0; i < n; i++) printf(" [fd %d revents %#x]", p[i].fd, p[i].revents);
    printf("\n");
}

static void select_show(const char *label, int nfds, fd_set *r, fd_set *w, fd_set *x, struct timeval *tv) {
    errno = 0;
    int n = select(nfds, r, w, x, tv);
    int e = errno;
    printf("%s: %d%s%s", label, n, n < 0 ? " " : "", n < 0 ? err_name(e) : "");
    if (r) show_set("r", r, nfds);
    if (w) show_set("w", w, nfds);
    if (x) show_set("x", x, nfds);
    if (tv && n == 0) printf(" left %ld.%06ld", (long)tv->tv_sec, (long)tv->tv_usec);
    printf("\n");
}

int main(void) {
    setup();
    int c, s, c2, s2;
    tcp_pair(AF_INET, &c, &s);
    tcp_pair(AF_INET, &c2, &s2);
    int pipefd[2];
    if (pipe(pipefd)) die("pipe");
    printf("fds %d %d %d %d pipe %d %d\n", c, s, c2, s2, pipefd[0], pipefd[1]);
    struct pollfd p[4] = {{s, POLLIN, 0}, {s2, POLLIN | POLLOUT, 0}, {pipefd[0], POLLIN, 0}, {-1, POLLIN, 0}};
    poll_show("poll idle", p, 4, 0);
    poll_show("poll only in 50ms", p, 1, 50);
    send(c, "x", 1, 0);
    poll_show("poll one readable", p, 4, 1000);
    write(pipefd[1], "p", 1);
    poll_show("poll pipe too", p, 4, -1);
    struct pollfd bad[2] = {{999, POLLIN, 0}, {s, POLLIN | POLLPRI | POLLRDHUP, 0}};
    poll_show("poll bad fd", bad, 2, 0);
    SHOW("poll efault", poll((struct pollfd *)8, 1, 0));

    struct timespec ts = {0, 50 * 1000000};
    sigset_t mask;
    sigemptyset(&mask);
    struct pollfd q[1] = {{c, POLLIN, 0}};
    SHOW("ppoll timeout", ppoll(q, 1, &ts, &mask));
    printf("ppoll timespec untouched %ld.%09ld revents %#x\n", (long)ts.tv_sec, ts.tv_nsec, q[0].revents);
    struct timespec zero = {0, 0};
    q[0].fd = s;
    SHOW("ppoll zero", ppoll(q, 1, &zero, NULL));
    printf("ppoll revents %#x\n", q[0].revents);

    fd_set r, w, x;
    int nfds = pipefd[1] + 1;
    FD_ZERO(&r); FD_ZERO(&w); FD_ZERO(&x);
    FD_SET(s, &r); FD_SET(s2, &r); FD_SET(c, &r); FD_SET(pipefd[0], &r);
    FD_SET(c, &w); FD_SET(pipefd[0], &w);
    FD_SET(s, &x); FD_SET(s2, &x);
    struct timeval tv = {1, 0};
    select_show("select mixed", nfds, &r, &w, &x, &tv);
    FD_ZERO(&r); FD_SET(s2, &r); FD_SET(c, &r);
    FD_ZERO(&x); FD_SET(s2, &x);
    tv = (struct timeval){0, 50000};
    select_show("select timeout", nfds, &r, NULL, &x, &tv);
    tv = (struct timeval){0, 0};
    FD_ZERO(&r); FD_SET(s, &r); FD_SET(s2, &r);
    select_show("select poll", nfds, &r, NULL, NULL, &tv);
    FD_ZERO(&r); FD_SET(s, &r); FD_SET(pipefd[1] + 5, &r);
    tv = (struct timeval){0, 0};
    select_show("select bad fd", pipefd[1] + 6, &r, NULL, NULL, &tv);
    select_show("select negative nfds", -1, NULL, NULL, NULL, &tv);

    /* Out-of-band data: exceptional. */
    send(c2, "!", 1, MSG_OOB);
    ms_sleep(20);
    FD_ZERO(&r); FD_SET(s2, &r);
    FD_ZERO(&x); FD_SET(s2, &x);
    tv = (struct timeval){1, 0};
    select_show("select oob", nfds, &r, NULL, &x, &tv);

    FD_ZERO(&r); FD_SET(s, &r); FD_SET(s2, &r);
    struct timespec pts = {0, 50 * 1000000};
    char buf[8];
    recv(s, buf, sizeof buf, 0);
    FD_ZERO(&r); FD_SET(s, &r);
    SHOW("pselect timeout", pselect(nfds, &r, NULL, NULL, &pts, &mask));
    show_set("r", &r, nfds);
    printf(" timespec untouched %ld.%09ld\n", (long)pts.tv_sec, pts.tv_nsec);
    send(c, "yz", 2, 0);
    FD_ZERO(&r); FD_SET(s, &r); FD_SET(s2, &r);
    SHOW("pselect ready", pselect(nfds, &r, NULL, NULL, NULL, NULL));
    show_set("r", &r, nfds);
    printf("\n");
    SHOW("recv", recv(s, buf, sizeof buf, 0));

    /* The peer goes: readable (EOF) and POLLHUP once both directions are shut. */
    close(c);
    ms_sleep(20);
    struct pollfd h[1] = {{s, POLLIN | POLLOUT | POLLRDHUP, 0}};
    poll_show("poll peer closed", h, 1, 1000);
    shutdown(s, SHUT_WR);
    ms_sleep(20);
    poll_show("poll both shut", h, 1, 1000);
    FD_ZERO(&r); FD_SET(s, &r);
    tv = (struct timeval){1, 0};
    select_show("select eof", nfds, &r, NULL, NULL, &tv);
    printf("done\n");
    return 0;
}

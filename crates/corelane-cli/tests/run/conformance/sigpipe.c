/* SIGPIPE: raised by a write to a socket whose peer is gone unless MSG_NOSIGNAL; handled,
 * ignored, and (in a child) the default action. */
#include "common.h"
#include <sys/uio.h>

static volatile sig_atomic_t pipes;
static void on_pipe(int sig) { (void)sig; pipes++; }

static int broken(int nonblock) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) die("socketpair");
    close(sv[1]);
    if (nonblock) set_nonblocking(sv[0], 1);
    return sv[0];
}

static void calls(int fd) {
    struct iovec iov = {"x", 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    SHOW(" write", write(fd, "x", 1));
    printf(" signals %d\n", (int)pipes);
    SHOW(" send", send(fd, "x", 1, 0));
    printf(" signals %d\n", (int)pipes);
    SHOW(" send nosignal", send(fd, "x", 1, MSG_NOSIGNAL));
    printf(" signals %d\n", (int)pipes);
    SHOW(" sendto", sendto(fd, "x", 1, 0, NULL, 0));
    printf(" signals %d\n", (int)pipes);
    SHOW(" sendmsg", sendmsg(fd, &m, 0));
    printf(" signals %d\n", (int)pipes);
    SHOW(" sendmsg nosignal", sendmsg(fd, &m, MSG_NOSIGNAL));
    printf(" signals %d\n", (int)pipes);
    SHOW(" writev", writev(fd, &iov, 1));
    printf(" signals %d\n", (int)pipes);
}

int main(void) {
    setup();
    struct sigaction sa = {.sa_handler = on_pipe};
    sigaction(SIGPIPE, &sa, NULL);
    for (int nb = 0; nb < 2; nb++) {
        printf("-- handled, nonblock %d\n", nb);
        pipes = 0;
        int fd = broken(nb);
        calls(fd);
        close(fd);
    }
    /* TCP: the peer closed and reset the connection. */
    printf("-- tcp handled\n");
    pipes = 0;
    int c, s;
    tcp_pair(AF_INET, &c, &s);
    close(s);
    struct pollfd p = {c, POLLIN, 0};
    poll(&p, 1, 1000);
    SHOW(" send into closed peer", send(c, "x", 1, 0)); /* queued; the peer answers RST */
    p.events = POLLOUT;
    for (int i = 0; i < 100 && !(p.revents & POLLERR); i++) {
        ms_sleep(5);
        poll(&p, 1, 0);
    }
    SHOW(" send after reset", send(c, "x", 1, 0));
    printf(" signals %d\n", (int)pipes);
    SHOW(" send again", send(c, "x", 1, MSG_NOSIGNAL));
    printf(" signals %d\n", (int)pipes);
    close(c);

    printf("-- ignored\n");
    signal(SIGPIPE, SIG_IGN);
    pipes = 0;
    int fd = broken(0);
    calls(fd);
    close(fd);

    printf("-- default, in a child\n");
    for (int how = 0; how < 3; how++) {
        fd = broken(how == 2);
        pid_t pid = fork();
        if (pid == 0) {
            signal(SIGPIPE, SIG_DFL);
            long r = how == 0 ? write(fd, "x", 1) : send(fd, "x", 1, how == 1 ? MSG_NOSIGNAL : 0);
            printf(" child %d returned %ld %s\n", how, r, err_name(errno));
            _exit(0);
        }
        reap(" child", pid);
        close(fd);
    }
    printf("done\n");
    return 0;
}

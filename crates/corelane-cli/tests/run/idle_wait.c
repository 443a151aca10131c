/* An idle server's loop: one message over a socket pair (so every lane carries something),
 * then epoll_wait and poll with a 1 ms timeout on sockets where nothing ever arrives, for
 * SECONDS seconds. Prints how many waits it made and how many returned events. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 3;
    int pair[2];
    char buf[8];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) return 2;
    if (send(pair[0], "ping", 4, 0) != 4 || recv(pair[1], buf, sizeof buf, 0) != 4) return 3;
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = pair[1]};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, pair[1], &ev) != 0) return 4;
    long waits = 0, ready = 0;
    double end = now() + seconds;
    while (now() < end) {
        struct epoll_event got[4];
        struct pollfd pfd = {.fd = pair[0], .events = POLLIN};
        ready += epoll_wait(ep, got, 4, 1) > 0;
        ready += poll(&pfd, 1, 1) > 0;
        waits += 2;
    }
    printf("waits %ld ready %ld\n", waits, ready);
    return 0;
}

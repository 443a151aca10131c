/* fd numbers: socket, socketpair, dup, dup2, dup3, fcntl(F_DUPFD, F_DUPFD_CLOEXEC) and
 * close_range give the numbers the kernel's rules say (the lowest free one), and a
 * duplicate is the same socket (data sent on one copy is received on another). */
#include "common.h"
#include <linux/close_range.h>
#include <sys/epoll.h>
#include <sys/syscall.h>

static void roundtrip(const char *label, int out, int in) {
    char buf[64] = {0};
    long w = send(out, label, strlen(label), 0);
    long r = recv(in, buf, sizeof buf - 1, 0);
    printf(" %s: send %ld recv %ld %s\n", label, w, r, buf);
}

int main(void) {
    setup();
    int first = socket(AF_INET, SOCK_STREAM, 0);
    printf("first socket %d\n", first);
    int sv[2];
    SHOW("socketpair", socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    printf("socketpair fds %d %d\n", sv[0], sv[1]);
    int d = dup(sv[0]);
    printf("dup %d cloexec %d\n", d, cloexec(d));
    roundtrip("dup", d, sv[1]);
    SHOW("close first", close(first));
    int d2 = dup(sv[1]);
    printf("dup into the hole %d\n", d2);
    roundtrip("dup hole", sv[0], d2);
    SHOW("dup2 to 10", dup2(sv[0], 10));
    roundtrip("dup2", 10, sv[1]);
    SHOW("dup2 same", dup2(10, 10));
    SHOW("dup2 bad", dup2(999, 11));
    SHOW("dup3 to 11 cloexec", dup3(sv[1], 11, O_CLOEXEC));
    printf("11 cloexec %d\n", cloexec(11));
    roundtrip("dup3", 10, 11);
    SHOW("dup3 same", dup3(11, 11, 0));
    SHOW("dup3 bad flags", dup3(10, 12, 0x40));
    SHOW("F_DUPFD 30", fcntl(sv[0], F_DUPFD, 30));
    SHOW("F_DUPFD 30 again", fcntl(sv[0], F_DUPFD, 30));
    SHOW("F_DUPFD_CLOEXEC 30", fcntl(sv[1], F_DUPFD_CLOEXEC, 30));
    printf("32 cloexec %d\n", cloexec(32));
    roundtrip("F_DUPFD", 30, 32);
    SHOW("F_DUPFD 7", fcntl(sv[0], F_DUPFD, 7));
    SHOW("F_DUPFD_CLOEXEC 0", fcntl(sv[1], F_DUPFD_CLOEXEC, 0));
    SHOW("F_DUPFD negative", fcntl(sv[1], F_DUPFD, -1));

    /* A socket's number reused by a pipe: the pipe is not a socket. */
    int p[2];
    if (pipe(p)) die("pipe");
    printf("pipe %d %d\n", p[0], p[1]);
    SHOW("dup2 pipe over socket 10", dup2(p[1], 10));
    SHOW("write 10 (now the pipe)", write(10, "pipe", 4));
    char buf[16] = {0};
    SHOW("read pipe", read(p[0], buf, sizeof buf));
    SHOW("recv on pipe", recv(10, buf, sizeof buf, MSG_DONTWAIT));
    SHOW("dup2 socket over pipe 10", dup2(sv[0], 10));
    roundtrip("socket back at 10", 10, sv[1]);

    SHOW("close_range 30..31 cloexec", close_range(30, 31, CLOSE_RANGE_CLOEXEC));
    printf("30 cloexec %d 31 cloexec %d\n", cloexec(30), cloexec(31));
    roundtrip("after cloexec", 31, 32);
    SHOW("close_range 6..11", close_range(6, 11, 0));
    printf("6 open %d 11 open %d\n", fcntl(6, F_GETFD) >= 0, fcntl(11, F_GETFD) >= 0);
    int s1 = socket(AF_INET, SOCK_DGRAM, 0);
    int s2 = socket(AF_INET6, SOCK_DGRAM, 0);
    int s3 = socket(AF_UNIX, SOCK_STREAM, 0);
    printf("new sockets %d %d %d\n", s1, s2, s3);
    SHOW("raw close_range", syscall(SYS_close_range, s2, s3, 0));
    SHOW("raw dup3", syscall(SYS_dup3, sv[0], 20, 0));
    roundtrip("raw dup3", 20, sv[1]);
    int s4 = socket(AF_INET, SOCK_STREAM, 0);
    printf("after raw close_range %d\n", s4);
    SHOW("close_range bad", close_range(10, 5, 0));
    SHOW("close 20", close(20));
    SHOW("close 20 again", close(20));
    SHOW("close_range all above 2", close_range(3, ~0U, 0));
    int l = socket(AF_INET, SOCK_STREAM, 0);
    int e = epoll_create1(0);
    int pr[2];
    pipe(pr);
    printf("after closing everything: socket %d epoll %d pipe %d %d\n", l, e, pr[0], pr[1]);
    int many[40];
    for (int i = 0; i < 40; i++) many[i] = socket(AF_INET, SOCK_DGRAM, 0);
    printf("forty sockets %d..%d\n", many[0], many[39]);
    printf("done\n");
    return 0;
}

/* fork, vfork, posix_spawn and exec: a child uses the sockets it inherited (a close-on-exec
 * one is gone after exec); the parent's still work after the child. */
#include "common.h"
#include <spawn.h>

extern char **environ;

/* The exec'd program: `fork_exec child FD CLOEXEC_FD`. */
static int child_main(int fd, int gone) {
    char buf[32] = {0};
    printf(" exec child: fd %d is a socket %d, cloexec fd %d: %s\n", fd,
           fcntl(fd, F_GETFD) >= 0, gone, fcntl(gone, F_GETFD) < 0 ? err_name(errno) : "open");
    long n = recv(fd, buf, 4, MSG_WAITALL);
    printf(" exec child: recv %ld %.4s\n", n, buf);
    SHOW(" exec child: send", send(fd, "back", 4, 0));
    struct pollfd p = {fd, POLLIN, 0};
    SHOW(" exec child: poll", poll(&p, 1, 2000));
    n = read(fd, buf, sizeof buf);
    printf(" exec child: read %ld %.*s\n", n, (int)(n > 0 ? n : 0), buf);
    return 0;
}

/* The parent's side of a child's exchange; printed once the child is reaped (so the lines
 * come in one order). */
static void exchange(const char *who, int mine, const char *child, pid_t pid) {
    char buf[8] = {0};
    write_full(mine, "ping", 4);
    long n = read_full(mine, buf, 4);
    write_full(mine, "bye", 3);
    reap(child, pid);
    printf(" parent: got %ld %.4s\n", n, buf);
}

int main(int argc, char **argv) {
    setup();
    if (argc == 4 && !strcmp(argv[1], "child")) return child_main(atoi(argv[2]), atoi(argv[3]));
    int c, s;
    tcp_pair(AF_INET, &c, &s);
    int gone = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    printf("fds %d %d cloexec %d\n", c, s, gone);
    char fd_arg[16], gone_arg[16];
    snprintf(fd_arg, sizeof fd_arg, "%d", c);
    snprintf(gone_arg, sizeof gone_arg, "%d", gone);
    char *args[] = {argv[0], "child", fd_arg, gone_arg, NULL};

    printf("-- fork\n");
    pid_t pid = fork();
    if (pid == 0) {
        char buf[8] = {0};
        long n = recv(c, buf, 4, MSG_WAITALL);
        printf(" fork child: recv %ld %.4s\n", n, buf);
        send(c, "pong", 4, 0);
        n = read_full(c, buf, 3);
        printf(" fork child: read %ld %.3s\n", n, buf);
        close(c);
        _exit(0);
    }
    exchange("parent", s, " fork child", pid);

    printf("-- fork then exec\n");
    pid = fork();
    if (pid == 0) {
        execv(argv[0], args);
        _exit(127);
    }
    exchange("parent", s, " exec child", pid);

    printf("-- vfork then exec\n");
    pid = vfork();
    if (pid == 0) {
        execv(argv[0], args);
        _exit(127);
    }
    exchange("parent", s, " vfork child", pid);

    printf("-- posix_spawn\n");
    int rc = posix_spawn(&pid, argv[0], NULL, NULL, args, environ);
    exchange("parent", s, " spawned child", pid);
    printf(" posix_spawn %d\n", rc);

    printf("-- the parent's sockets after its children\n");
    write_full(c, "last", 4);
    char buf[8] = {0};
    printf(" parent: read %ld %.4s\n", read_full(s, buf, 4), buf);
    close(c);
    SHOW(" parent: recv eof", recv(s, buf, sizeof buf, 0));
    printf("done\n");
    return 0;
}

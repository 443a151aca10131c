/* Programs for tests/run.rs: one mode per argv[1], each printing what it saw. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int listener(int nonblocking) {
    int fd = socket(AF_INET, SOCK_STREAM | (nonblocking ? SOCK_NONBLOCK : 0), 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (void *)&a, sizeof a) || listen(fd, 16)) { perror("listen"); exit(2); }
    return fd;
}

/* A round trip over a socketpair: proves socket calls work (and are delegated). */
static int echo_once(void) {
    int sv[2];
    char buf[8] = {0};
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return -1;
    if (write(sv[0], "ping", 4) != 4 || read(sv[1], buf, sizeof buf) != 4) return -1;
    close(sv[0]);
    close(sv[1]);
    return strcmp(buf, "ping") == 0 ? 0 : -1;
}

/* writev/readv and sendmsg/recvmsg over a socketpair (the writing end non-blocking: a
 * blocking vectored send stays the program's own call), each message split over two
 * buffers; then writev/readv on a pipe, which is not a socket and stays the program's too. */
static int vectored(void) {
    int sv[2], pipefd[2];
    char a[3] = {0}, b[3] = {0};
    struct iovec out[2] = {{"pi", 2}, {"ng", 2}}, in[2] = {{a, 2}, {b, 2}};
    struct msghdr sent = {.msg_iov = out, .msg_iovlen = 2}, got = {.msg_iov = in, .msg_iovlen = 2};
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || pipe(pipefd)) return -1;
    if (fcntl(sv[0], F_SETFL, O_NONBLOCK)) return -1;
    if (writev(sv[0], out, 2) != 4 || readv(sv[1], in, 2) != 4) return -1;
    int ok = !strcmp(a, "pi") && !strcmp(b, "ng");
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    if (sendmsg(sv[0], &sent, 0) != 4 || recvmsg(sv[1], &got, 0) != 4) return -1;
    ok = ok && !strcmp(a, "pi") && !strcmp(b, "ng");
    memset(a, 0, sizeof a);
    if (writev(pipefd[1], out, 1) != 2 || readv(pipefd[0], in, 1) != 2) return -1;
    ok = ok && !strcmp(a, "pi");
    close(sv[0]);
    close(sv[1]);
    printf("vectored %s\n", ok ? "ok" : "mixed up");
    return ok ? 0 : 1;
}

static void print_tasks(void) {
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[128], line[256], comm[64] = {0}, cpus[128] = {0};
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
        fclose(f);
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f))
            if (!strncmp(line, "Cpus_allowed_list:", 18)) sscanf(line + 18, "%127s", cpus);
        if (f) fclose(f);
        printf("task %s cpus %s\n", comm, cpus);
    }
    closedir(d);
}

static void *block_in_accept(void *arg) {
    int fd = *(int *)arg;
    int c = accept(fd, NULL, NULL);
    printf("accept returned %d errno %d\n", c, errno);
    return NULL;
}

static void *send_signal_later(void *arg) {
    usleep(200000);
    pthread_kill(*(pthread_t *)arg, SIGUSR1);
    return NULL;
}

static int peer_fd = -1;
static void *write_later(void *arg) {
    (void)arg;
    usleep(400000);
    write(peer_fd, "late", 4);
    return NULL;
}

static void on_usr1(int sig) { (void)sig; }

static int eintr(int restart) {
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = restart ? SA_RESTART : 0};
    sigaction(SIGUSR1, &sa, NULL);
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    peer_fd = sv[1];
    pthread_t self = pthread_self(), t1, t2;
    pthread_create(&t1, NULL, send_signal_later, &self);
    pthread_create(&t2, NULL, write_later, NULL);
    char buf[8] = {0};
    ssize_t r = recv(sv[0], buf, sizeof buf, 0);
    printf("recv %zd errno %d data %s\n", r, r < 0 ? errno : 0, r > 0 ? buf : "-");
    pthread_join(t1, NULL);
    pthread_join(t2, NULL);
    return 0;
}

static int sigpipe(const char *how) {
    if (!strcmp(how, "ignore")) signal(SIGPIPE, SIG_IGN);
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    close(sv[1]);
    if (!strcmp(how, "nosignal")) {
        ssize_t r = send(sv[0], "x", 1, MSG_NOSIGNAL);
        printf("send %zd errno %d\n", r, errno);
        return 0;
    }
    ssize_t r = write(sv[0], "x", 1);
    printf("write %zd errno %d\n", r, errno);
    return 0;
}

static int fork_child(void) {
    pthread_t t;
    int fd = listener(0);
    pthread_create(&t, NULL, block_in_accept, &fd); /* a second thread, busy in a call */
    usleep(100000);
    if (echo_once()) return 3;
    pid_t pid = fork();
    if (pid == 0) {
        int ok = echo_once() == 0;
        printf("child echo %s\n", ok ? "ok" : "failed");
        print_tasks();
        fflush(stdout);
        _exit(ok ? 0 : 4);
    }
    int status;
    waitpid(pid, &status, 0);
    printf("child status %d\n", WEXITSTATUS(status));
    fflush(stdout);
    _exit(WEXITSTATUS(status));
}

static int spawn_grep(void) {
    if (echo_once()) return 3; /* syscall threads running before the spawn */
    pid_t pid;
    char *argv[] = {"grep", "-q", "libcorelane_preload", "/proc/self/maps", NULL};
    int rc = posix_spawnp(&pid, "grep", NULL, NULL, argv, environ);
    if (rc) { printf("posix_spawn failed %d\n", rc); return 5; }
    int status;
    waitpid(pid, &status, 0);
    if (echo_once()) return 3;
    printf("spawned grep status %d\n", WEXITSTATUS(status));
    return WEXITSTATUS(status);
}

static int non_sockets(void) {
    int p[2];
    char buf[64];
    pipe(p);
    for (int i = 0; i < 50; i++) {
        if (write(p[1], "abc", 3) != 3 || read(p[0], buf, 3) != 3) return 3;
    }
    FILE *f = tmpfile();
    int fd = fileno(f);
    errno = 4321;
    if (write(fd, "hello", 5) != 5 || lseek(fd, 0, SEEK_SET) != 0 || read(fd, buf, 5) != 5) return 3;
    printf("errno after file io %d\n", errno);
    close(p[0]);
    close(p[1]);
    fclose(f);
    return 0;
}

static int errors_and_nonblocking(void) {
    int sv[2];
    char buf[8];
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv);
    double t = now();
    errno = 1234;
    ssize_t w = send(sv[0], "x", 1, 0);
    printf("send %zd errno %d\n", w, errno);
    recv(sv[1], buf, 1, 0);
    ssize_t r = recv(sv[1], buf, 1, 0);
    printf("empty recv %zd errno %d\n", r, errno);
    int l = listener(1);
    int c = accept(l, NULL, NULL);
    printf("empty accept %d errno %d\n", c, errno);
    r = recv(12345, buf, 1, 0);
    printf("bad fd recv %zd errno %d\n", r, errno);
    r = read(12345, buf, 1);
    printf("bad fd read %zd errno %d\n", r, errno);
    r = send(sv[0], (void *)16, 8, 0);
    printf("bad buffer send %zd errno %d\n", r, errno);
    int n = poll((void *)16, 1, 0);
    printf("bad poll %d errno %d\n", n, errno);
    n = close(12345);
    printf("bad close %d errno %d\n", n, errno);
    printf("elapsed %.3f\n", now() - t);
    return 0;
}

static int accept_and_close(void) {
    int fd = listener(0);
    pthread_t t;
    pthread_create(&t, NULL, block_in_accept, &fd);
    usleep(200000);
    double t0 = now();
    int rc = close(fd);
    printf("close %d after %.3f\n", rc, now() - t0);
    printf("other calls %s\n", echo_once() == 0 ? "ok" : "failed");
    fflush(stdout);
    return 0; /* exit() ends the thread still in accept, as the kernel left it */
}

static int placement(void) {
    pthread_t t;
    int fd = listener(0);
    pthread_create(&t, NULL, block_in_accept, &fd);
    if (echo_once()) return 3;
    usleep(50000);
    print_tasks();
    fflush(stdout);
    return 0;
}

static int daemonize(const char *marker) {
    if (fork() == 0) {
        setsid();
        if (fork() == 0) {
            usleep(500000);
            FILE *f = fopen(marker, "w");
            if (f) fclose(f);
            _exit(0);
        }
        _exit(0);
    }
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "echo")) { printf("echo %s\n", echo_once() ? "failed" : "ok"); return 0; }
    if (!strcmp(mode, "vectored")) return vectored();
    if (!strcmp(mode, "env")) { printf("LD_PRELOAD=%s\n", getenv("LD_PRELOAD")); return echo_once(); }
    if (!strcmp(mode, "eintr")) return eintr(0);
    if (!strcmp(mode, "restart")) return eintr(1);
    if (!strcmp(mode, "sigpipe")) return sigpipe(argc > 2 ? argv[2] : "");
    if (!strcmp(mode, "fork")) return fork_child();
    if (!strcmp(mode, "spawn")) return spawn_grep();
    if (!strcmp(mode, "files")) return non_sockets();
    if (!strcmp(mode, "errors")) return errors_and_nonblocking();
    if (!strcmp(mode, "accept-close")) return accept_and_close();
    if (!strcmp(mode, "placement")) return placement();
    if (!strcmp(mode, "daemon")) return daemonize(argv[2]);
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}

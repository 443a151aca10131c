/* Shared by the conformance programs (tests/run_conformance.rs): each runs natively and under
 * `corelane run`, and its output must be the same byte for byte. So a program prints only what
 * the kernel fixes: results, errno names, data, fd numbers where the call is about numbers;
 * never a time, a pid or an ephemeral port. Loopback only; alarm() ends a program that hangs. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Unbuffered output (a forked child's lines land in order), a 20 s safety net. */
static void setup(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGALRM, SIG_DFL);
    alarm(20);
}

static const char *err_name(int e) {
    const char *name = strerrorname_np(e);
    return name ? name : "E?";
}

/* "LABEL = RET" or "LABEL = -1 ENAME": errno read right after the call. */
#define SHOW(label, expr)                                                      \
    do {                                                                       \
        errno = 0;                                                             \
        long show_ret_ = (long)(expr);                                         \
        int show_err_ = errno;                                                 \
        if (show_ret_ < 0)                                                     \
            printf("%s = %ld %s\n", (label), show_ret_, err_name(show_err_));  \
        else                                                                   \
            printf("%s = %ld\n", (label), show_ret_);                          \
    } while (0)

static void die(const char *what) {
    printf("FATAL %s: %s\n", what, err_name(errno));
    exit(3);
}

static void ms_sleep(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

static int nonblocking(int fd) { return (fcntl(fd, F_GETFL) & O_NONBLOCK) != 0; }
static int cloexec(int fd) { return (fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0; }
static void set_nonblocking(int fd, int on) {
    int fl = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
}

/* A listening TCP socket on 127.0.0.1 (or ::1), port chosen by the kernel. */
static int tcp_listener(int family, int flags) {
    int fd = socket(family, SOCK_STREAM | flags, 0);
    if (fd < 0) die("socket");
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_storage ss = {0};
    socklen_t len;
    if (family == AF_INET6) {
        struct sockaddr_in6 *a = (void *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (void *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *a;
    }
    if (bind(fd, (void *)&ss, len) || listen(fd, 16)) die("listen");
    return fd;
}

/* Connects a new blocking socket to listener `l`'s address. */
static int tcp_connect_to(int l) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    getsockname(l, (void *)&ss, &len);
    int fd = socket(ss.ss_family, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (void *)&ss, len)) die("connect");
    return fd;
}

/* A connected TCP pair over loopback: *c the client, *s the accepted end (both blocking). */
static void tcp_pair(int family, int *c, int *s) {
    int l = tcp_listener(family, 0);
    *c = tcp_connect_to(l);
    *s = accept(l, NULL, NULL);
    if (*s < 0) die("accept");
    close(l);
}

/* Reads exactly n bytes (or until EOF/error); returns what it read. */
static long read_full(int fd, char *buf, long n) {
    long done = 0;
    while (done < n) {
        long r = read(fd, buf + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        done += r;
    }
    return done;
}

static long write_full(int fd, const char *buf, long n) {
    long done = 0;
    while (done < n) {
        long r = write(fd, buf + done, n - done);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        done += r;
    }
    return done;
}

/* An address as text without its port: "inet 127.0.0.1", "inet6 ::1", "unix @name". */
static const char *addr_text(const struct sockaddr *sa, socklen_t len) {
    static char out[160];
    char ip[INET6_ADDRSTRLEN] = "?";
    if (len == 0) return "none";
    if (sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)sa)->sin_addr, ip, sizeof ip);
        snprintf(out, sizeof out, "inet %s", ip);
    } else if (sa->sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)sa)->sin6_addr, ip, sizeof ip);
        snprintf(out, sizeof out, "inet6 %s", ip);
    } else if (sa->sa_family == AF_UNIX) {
        snprintf(out, sizeof out, "unix len %u", (unsigned)len);
    } else {
        snprintf(out, sizeof out, "family %d", sa->sa_family);
    }
    return out;
}

static unsigned port_of(const struct sockaddr *sa) {
    if (sa->sa_family == AF_INET) return ntohs(((struct sockaddr_in *)sa)->sin_port);
    if (sa->sa_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)sa)->sin6_port);
    return 0;
}

static unsigned local_port(int fd) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (void *)&ss, &len)) return 0;
    return port_of((void *)&ss);
}

/* A small checksum of a buffer (what a transfer delivered, without printing it all). */
static unsigned long sum(const char *buf, long n) {
    unsigned long h = 5381;
    for (long i = 0; i < n; i++) h = h * 33 + (unsigned char)buf[i];
    return h;
}

/* Waits for a child and prints how it ended. */
static void reap(const char *who, pid_t pid) {
    int status;
    if (waitpid(pid, &status, 0) != pid) die("waitpid");
    if (WIFEXITED(status))
        printf("%s exited %d\n", who, WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        printf("%s killed by %s\n", who, sigabbrev_np(WTERMSIG(status)));
}

/* SCM_RIGHTS: a TCP socket passed over a unix socket (to this process and to a forked child),
 * then used by its receiver; the received number is the lowest free one. */
#include "common.h"

static void pass(int over, int fd) {
    char byte = 'F';
    struct iovec iov = {&byte, 1};
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
    memset(&u, 0, sizeof u);
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    SHOW(" sendmsg rights", sendmsg(over, &m, 0));
}

static int receive(int over, int flags) {
    char byte = 0;
    struct iovec iov = {&byte, 1};
    union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    long n = recvmsg(over, &m, flags);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    int fd = -1;
    if (c && c->cmsg_type == SCM_RIGHTS) memcpy(&fd, CMSG_DATA(c), sizeof fd);
    printf(" recvmsg %ld byte %c level %d type %d msg_flags %#x fd %d cloexec %d\n", n, byte,
           c ? c->cmsg_level : -1, c ? c->cmsg_type : -1, m.msg_flags, fd, fd >= 0 ? cloexec(fd) : -1);
    return fd;
}

static void use(const char *who, int fd, int peer) {
    char buf[16] = {0};
    write_full(peer, "to-passed", 9);
    long n = read_full(fd, buf, 9);
    printf(" %s: read %ld %s\n", who, n, buf);
    SHOW(" send on passed", send(fd, "from-passed", 11, 0));
}

int main(void) {
    setup();
    int ctl[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, ctl)) die("socketpair");
    int c, s;
    tcp_pair(AF_INET, &c, &s);
    printf("ctl %d %d tcp %d %d\n", ctl[0], ctl[1], c, s);

    printf("-- to itself\n");
    pass(ctl[0], s);
    int got = receive(ctl[1], 0);
    use("self", got, c);
    char buf[16] = {0};
    printf(" peer read %ld %s\n", read_full(c, buf, 11), buf);
    close(got);
    pass(ctl[0], s);
    got = receive(ctl[1], MSG_CMSG_CLOEXEC);
    close(got);

    printf("-- to a forked child\n");
    pass(ctl[0], s);
    pid_t pid = fork();
    if (pid == 0) {
        close(s);
        int fd = receive(ctl[1], 0);
        use("child", fd, c);
        close(fd);
        _exit(0);
    }
    close(s);
    reap(" child", pid);
    memset(buf, 0, sizeof buf);
    printf(" peer read %ld %s\n", read_full(c, buf, 11), buf);
    SHOW(" peer recv eof", recv(c, buf, sizeof buf, 0));

    printf("-- a listener passed, accept on the received copy\n");
    int l = tcp_listener(AF_INET, 0);
    pass(ctl[0], l);
    int lr = receive(ctl[1], 0);
    int cc = tcp_connect_to(l);
    int a = accept(lr, NULL, NULL);
    printf(" accepted fd %d\n", a);
    use("accepted", a, cc);
    memset(buf, 0, sizeof buf);
    printf(" peer read %ld %s\n", read_full(cc, buf, 11), buf);

    printf("-- too little control space\n");
    pass(ctl[0], l);
    char byte;
    struct iovec iov = {&byte, 1};
    char tiny[4];
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = tiny, .msg_controllen = sizeof tiny};
    SHOW(" recvmsg", recvmsg(ctl[1], &m, 0));
    printf(" msg_flags %#x controllen %zu\n", m.msg_flags, (size_t)m.msg_controllen);
    int next = socket(AF_INET, SOCK_DGRAM, 0);
    printf(" next socket %d (nothing leaked)\n", next);
    printf("done\n");
    return 0;
}

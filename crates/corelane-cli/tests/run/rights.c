// A carried call must run with its caller's rights and descriptors: each mode changes the
// rights of one thread (or of the process) after a first carried call, then makes the same
// kind of call again and prints what the kernel did, so that its output under
// `corelane run` (either lane) can be compared byte for byte with the native run.
// Usage: rights MODE [ARG]
//   setuid       glibc setresuid to nobody between two sends (peer's SCM_CREDENTIALS) and a
//                netlink RTM_NEWADDR on a socket opened before the drop (own netns)
//   capset       raw capset to empty sets, then RTM_NEWADDR (own netns)
//   setfsuid DIR setfsuid(nobody), then connect to a unix socket in DIR/priv (0700, root's)
//   thread-uid   raw setresuid in one thread, which then sends (peer's SCM_CREDENTIALS)
//   seccomp      a filter refusing the send calls, this thread only, then send
//   seccomp-tsync  the same filter on every thread (SECCOMP_FILTER_FLAG_TSYNC)
//   landlock     a Landlock domain refusing TCP connect, then a non-blocking connect
//   close-fds    send; close every descriptor the program did not open; send again
//   unshare-files  a thread with its own descriptor table sends on a number it reused
//   cpu-exit     100000 sends, then _exit(0)
//   cpu-term     100000 sends, prints "ready", then waits for a signal
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#define NOBODY 65534

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  fflush(stdout);
}

static void die(const char *what) {
  out("%s failed: errno %d\n", what, errno);
  exit(2);
}

// A unix datagram pair whose receiving end [1] gets each sender's credentials.
static void cred_pair(int sv[2]) {
  int on = 1;
  if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv)) die("socketpair");
  if (setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &on, sizeof on)) die("SO_PASSCRED");
}

// Sends one byte on fd; prints the result under `label`.
static void send_one(const char *label, int fd) {
  errno = 0;
  ssize_t n = send(fd, "x", 1, 0);
  out("%s send %zd errno %d\n", label, n, n < 0 ? errno : 0);
}

// Receives one datagram from fd without waiting; prints the uid it came with.
static void recv_uid(const char *label, int fd) {
  char byte, control[CMSG_SPACE(sizeof(struct ucred))];
  struct iovec iov = {&byte, 1};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                       .msg_controllen = sizeof control};
  ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);
  if (n < 0) {
    out("%s recv -1 errno %d\n", label, errno);
    return;
  }
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  if (!c || c->cmsg_type != SCM_CREDENTIALS) {
    out("%s recv %zd no credentials\n", label, n);
    return;
  }
  struct ucred cred;
  memcpy(&cred, CMSG_DATA(c), sizeof cred);
  out("%s recv %zd uid %u\n", label, n, cred.uid);
}

static void own_netns(void) {
  if (unshare(CLONE_NEWNET)) die("unshare(CLONE_NEWNET)");
}

// Asks the kernel to add ADDR/32 on lo through the netlink socket nl; prints its answer.
static void add_address(const char *label, int nl, const char *addr) {
  struct {
    struct nlmsghdr nh;
    struct ifaddrmsg ifa;
    char attrs[64];
  } req;
  memset(&req, 0, sizeof req);
  req.nh.nlmsg_type = RTM_NEWADDR;
  req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
  req.nh.nlmsg_seq = 1;
  req.ifa.ifa_family = AF_INET;
  req.ifa.ifa_prefixlen = 32;
  req.ifa.ifa_index = if_nametoindex("lo");
  struct rtattr *rta = (struct rtattr *)req.attrs;
  rta->rta_type = IFA_LOCAL;
  rta->rta_len = RTA_LENGTH(4);
  inet_pton(AF_INET, addr, RTA_DATA(rta));
  req.nh.nlmsg_len = NLMSG_LENGTH(sizeof req.ifa) + RTA_ALIGN(rta->rta_len);
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  errno = 0;
  ssize_t n = sendto(nl, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel);
  if (n < 0) {
    out("%s netlink send -1 errno %d\n", label, errno);
    return;
  }
  char answer[4096];
  n = recv(nl, answer, sizeof answer, 0);
  struct nlmsghdr *h = (struct nlmsghdr *)answer;
  if (n < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)) || h->nlmsg_type != NLMSG_ERROR) {
    out("%s netlink answer %zd errno %d\n", label, n, n < 0 ? errno : 0);
    return;
  }
  struct nlmsgerr *e = NLMSG_DATA(h);
  out("%s add %s error %d\n", label, addr, -e->error);
}

static int netlink_route(void) {
  int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (nl < 0) die("netlink socket");
  return nl;
}

static int mode_setuid(void) {
  own_netns();
  int sv[2], nl = netlink_route();
  cred_pair(sv);
  send_one("root", sv[0]);
  recv_uid("root", sv[1]);
  add_address("root", nl, "10.9.9.1");
  if (setresuid(NOBODY, NOBODY, NOBODY)) die("setresuid");
  send_one("nobody", sv[0]);
  recv_uid("nobody", sv[1]);
  add_address("nobody", nl, "10.9.9.2");
  return 0;
}

static int mode_capset(void) {
  own_netns();
  int nl = netlink_route();
  add_address("full caps", nl, "10.9.9.1");
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  memset(data, 0, sizeof data);
  if (syscall(SYS_capset, &hdr, data)) die("capset");
  add_address("no caps", nl, "10.9.9.2");
  return 0;
}

static void connect_unix(const char *label, const char *path) {
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) die("unix socket");
  errno = 0;
  int r = connect(fd, (struct sockaddr *)&addr, sizeof addr);
  out("%s connect %d errno %d\n", label, r, r < 0 ? errno : 0);
  close(fd);
}

static int mode_setfsuid(const char *dir) {
  char priv[512], path[600];
  snprintf(priv, sizeof priv, "%s/priv", dir);
  snprintf(path, sizeof path, "%s/s", priv);
  if (mkdir(priv, 0700) && errno != EEXIST) die("mkdir");
  chmod(dir, 0755);
  struct sockaddr_un addr = {.sun_family = AF_UNIX};
  snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
  unlink(path);
  int l = socket(AF_UNIX, SOCK_STREAM, 0);
  if (l < 0 || bind(l, (struct sockaddr *)&addr, sizeof addr) || listen(l, 8)) die("listen");
  connect_unix("fsuid 0", path);
  setfsuid(NOBODY);
  out("fsuid now %d\n", setfsuid(-1));
  connect_unix("fsuid nobody", path);
  unlink(path);
  return 0;
}

static int thread_sv[2];

static void *drop_and_send(void *unused) {
  (void)unused;
  if (syscall(SYS_setresuid, NOBODY, NOBODY, NOBODY)) die("raw setresuid");
  out("thread uid %ld\n", (long)syscall(SYS_getuid));
  send_one("thread", thread_sv[0]);
  recv_uid("thread", thread_sv[1]);
  return NULL;
}

static int mode_thread_uid(void) {
  cred_pair(thread_sv);
  send_one("main", thread_sv[0]);
  recv_uid("main", thread_sv[1]);
  pthread_t t;
  pthread_create(&t, NULL, drop_and_send, NULL);
  pthread_join(t, NULL);
  send_one("main after", thread_sv[0]);
  recv_uid("main after", thread_sv[1]);
  return 0;
}

static int mode_seccomp(int tsync) {
  int sv[2];
  cred_pair(sv);
  send_one("before filter", sv[0]);
  recv_uid("before filter", sv[1]);
  struct sock_filter code[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sendto, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sendmsg, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sendmmsg, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
  };
  struct sock_fprog prog = {sizeof code / sizeof code[0], code};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) die("no_new_privs");
  if (tsync) {
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog))
      die("seccomp tsync");
  } else if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
    die("prctl seccomp");
  }
  send_one("after filter", sv[0]);
  recv_uid("after filter", sv[1]);
  return 0;
}

// Landlock's network part, spelled out (this machine's headers predate it).
struct ruleset_attr {
  uint64_t handled_access_fs, handled_access_net;
};
#define ACCESS_NET_CONNECT_TCP (1ULL << 1)

static void connect_tcp(const char *label, int port) {
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (fd < 0) die("tcp socket");
  errno = 0;
  int r = connect(fd, (struct sockaddr *)&addr, sizeof addr);
  // A non-blocking connect on loopback may finish at once or be in progress: both are "made".
  if (r < 0 && errno == EINPROGRESS) r = 0, errno = 0;
  out("%s connect %d errno %d\n", label, r, r < 0 ? errno : 0);
  close(fd);
}

static int mode_landlock(void) {
  long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, 1 /* VERSION */);
  if (abi < 4) {
    out("skip: landlock ABI %ld errno %d\n", abi, abi < 0 ? errno : 0);
    return 0;
  }
  struct sockaddr_in addr = {.sin_family = AF_INET};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int l = socket(AF_INET, SOCK_STREAM, 0);
  if (l < 0 || bind(l, (struct sockaddr *)&addr, sizeof addr) || listen(l, 8) ||
      getsockname(l, (struct sockaddr *)&addr, &len))
    die("tcp listen");
  int port = ntohs(addr.sin_port);
  connect_tcp("unrestricted", port);
  struct ruleset_attr attr = {0, ACCESS_NET_CONNECT_TCP};
  int ruleset = syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
  if (ruleset < 0) die("landlock_create_ruleset");
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) die("no_new_privs");
  if (syscall(SYS_landlock_restrict_self, ruleset, 0)) die("landlock_restrict_self");
  close(ruleset);
  connect_tcp("restricted", port);
  return 0;
}

static int mode_close_fds(void) {
  int sv[2];
  cred_pair(sv);
  send_one("first", sv[0]);
  recv_uid("first", sv[1]);
  for (int fd = 3; fd < 1024; fd++)
    if (fd != sv[0] && fd != sv[1]) close(fd);
  usleep(200000);  // long enough for a kernel poller to go to sleep
  send_one("after closing", sv[0]);
  recv_uid("after closing", sv[1]);
  return 0;
}

// A UDP socket bound to loopback (port chosen by the kernel); its port in *port.
static int udp_bound(int *port) {
  struct sockaddr_in addr = {.sin_family = AF_INET};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) ||
      getsockname(fd, (struct sockaddr *)&addr, &len))
    die("udp bind");
  *port = ntohs(addr.sin_port);
  return fd;
}

static int udp_to(int port) {
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr)) die("udp connect");
  return fd;
}

static void drain(const char *label, int fd) {
  char buf[64];
  ssize_t n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
  if (n < 0) {
    out("%s got nothing (errno %d)\n", label, errno);
    return;
  }
  buf[n] = 0;
  out("%s got %s\n", label, buf);
}

static int shared_fd, other_port;

static void *own_table_send(void *unused) {
  (void)unused;
  if (unshare(CLONE_FILES)) die("unshare(CLONE_FILES)");
  int mine = udp_to(other_port);
  if (dup2(mine, shared_fd) != shared_fd) die("dup2");
  close(mine);
  errno = 0;
  ssize_t n = send(shared_fd, "thread", 6, 0);
  out("thread send %zd errno %d\n", n, n < 0 ? errno : 0);
  return NULL;
}

static int mode_unshare_files(void) {
  int main_port, main_rx = udp_bound(&main_port);
  int other_rx = udp_bound(&other_port);
  shared_fd = udp_to(main_port);
  ssize_t n = send(shared_fd, "main", 4, 0);
  out("main send %zd\n", n);
  drain("main's receiver", main_rx);
  pthread_t t;
  pthread_create(&t, NULL, own_table_send, NULL);
  pthread_join(t, NULL);
  usleep(100000);
  drain("main's receiver", main_rx);
  drain("thread's receiver", other_rx);
  return 0;
}

static void many_sends(void) {
  int sv[2];
  char byte;
  if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv)) die("socketpair");
  for (int i = 0; i < 100000; i++)
    if (send(sv[0], "x", 1, 0) != 1 || recv(sv[1], &byte, 1, 0) != 1) die("send/recv");
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "setuid")) return mode_setuid();
  if (!strcmp(mode, "capset")) return mode_capset();
  if (!strcmp(mode, "setfsuid") && argc > 2) return mode_setfsuid(argv[2]);
  if (!strcmp(mode, "thread-uid")) return mode_thread_uid();
  if (!strcmp(mode, "seccomp")) return mode_seccomp(0);
  if (!strcmp(mode, "seccomp-tsync")) return mode_seccomp(1);
  if (!strcmp(mode, "landlock")) return mode_landlock();
  if (!strcmp(mode, "close-fds")) return mode_close_fds();
  if (!strcmp(mode, "unshare-files")) return mode_unshare_files();
  if (!strcmp(mode, "cpu-exit")) {
    many_sends();
    out("sent\n");
    _exit(0);
  }
  if (!strcmp(mode, "cpu-term")) {
    many_sends();
    out("ready\n");
    for (int i = 0; i < 300; i++) usleep(100000);
    return 0;
  }
  fprintf(stderr, "unknown mode %s\n", mode);
  return 64;
}

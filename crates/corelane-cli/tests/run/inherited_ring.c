// A root program under `corelane run --syscall-lane uring` whose workers drop to nobody, as
// prefork servers do (after the reviewer's proof of concept). Its first network call makes
// the library create its ring, as root. Then it tries, and prints what happened:
//   - to open a file through that ring itself (the ring must refuse every operation but the
//     lane's own);
//   - in a fork()ed worker that dropped root: to find the parent's ring (fd or mapping), then
//     to open through the worker's own new ring;
//   - in a worker made by a raw clone (no atfork handler runs): to find the mappings, then to
//     map the inherited fd itself and open through it, and to register anything on it;
//   - a send through the lane at the end (the restricted ring still works).
// Usage: inherited_ring SECRET_FILE (owned by root, mode 0600).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

struct ring {
  int fd;
  char *base, *sqes;
};

static struct io_uring_params lay;  // the layout of a 256-entry ring on this kernel

static int count_fds(int *last) {
  char path[64], target[128];
  int n = 0;
  for (int fd = 0; fd < 1024; fd++) {
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(path, target, sizeof target - 1);
    if (len > 0) {
      target[len] = 0;
      if (strstr(target, "io_uring")) n++, *last = fd;
    }
  }
  return n;
}

// Counts the io_uring mappings; the last ones at offset 0 and at the SQE offset go to `r`.
static int count_maps(struct ring *r) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  int n = 0;
  while (f && fgets(line, sizeof line, f)) {
    if (!strstr(line, "io_uring")) continue;
    unsigned long lo, hi, off;
    sscanf(line, "%lx-%lx %*s %lx", &lo, &hi, &off);
    n++;
    if (off == 0) r->base = (char *)lo;
    else if (off == IORING_OFF_SQES) r->sqes = (char *)lo;
  }
  if (f) fclose(f);
  return n;
}

static void map_fd(struct ring *r) {
  size_t ring_len = lay.sq_off.array + lay.sq_entries * 4;
  size_t cq_len = lay.cq_off.cqes + lay.cq_entries * sizeof(struct io_uring_cqe);
  if (cq_len > ring_len) ring_len = cq_len;
  r->base = mmap(0, ring_len, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
  r->sqes = mmap(0, lay.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
                 MAP_SHARED, r->fd, IORING_OFF_SQES);
  if (r->base == MAP_FAILED || r->sqes == MAP_FAILED) r->base = r->sqes = 0;
}

// Puts an OPENAT of `path` in entry 250 (one the library does not use while idle) and waits
// for its completion: the kernel's result (an fd, or -errno), or -99999 if none came. The
// path is argv[1] or a literal, at the same address in the parent and every child, since an
// SQPOLL thread reads it in the memory of the process that made the ring.
static long openat_through(struct ring *r, const char *path) {
  char *base = r->base;
  unsigned *sq_tail = (unsigned *)(base + lay.sq_off.tail);
  unsigned mask = *(unsigned *)(base + lay.sq_off.ring_mask);
  unsigned *sq_array = (unsigned *)(base + lay.sq_off.array);
  unsigned *cq_head = (unsigned *)(base + lay.cq_off.head);
  unsigned *cq_tail = (unsigned *)(base + lay.cq_off.tail);
  unsigned cq_mask = *(unsigned *)(base + lay.cq_off.ring_mask);
  struct io_uring_cqe *cqes = (struct io_uring_cqe *)(base + lay.cq_off.cqes);
  unsigned idx = 250;
  struct io_uring_sqe *s = (struct io_uring_sqe *)r->sqes + idx;
  memset(s, 0, sizeof *s);
  s->opcode = IORING_OP_OPENAT;
  s->fd = AT_FDCWD;
  s->addr = (unsigned long)path;
  s->open_flags = O_RDONLY;
  s->user_data = 0xA11CE;
  unsigned tail = atomic_load((_Atomic unsigned *)sq_tail);
  sq_array[tail & mask] = idx;
  atomic_store((_Atomic unsigned *)sq_tail, tail + 1);
  for (int i = 0; i < 3000; i++) {
    // Submits it on a plain ring, wakes the poller of an SQPOLL one.
    syscall(__NR_io_uring_enter, r->fd, i == 0, 0, IORING_ENTER_SQ_WAKEUP, NULL, 0);
    unsigned h = atomic_load((_Atomic unsigned *)cq_head);
    unsigned t = atomic_load((_Atomic unsigned *)cq_tail);
    for (; h != t; h++) {
      struct io_uring_cqe *c = &cqes[h & cq_mask];
      if (c->user_data == 0xA11CE) {
        atomic_store((_Atomic unsigned *)cq_head, h + 1);
        return c->res;
      }
    }
    usleep(1000);
  }
  return -99999;
}

static void drop_root(void) {
  if (setgroups(0, NULL) || setgid(65534) || setuid(65534)) {
    perror("dropping root");
    _exit(2);
  }
}

static void fork_child(const char *secret, int udp) {
  drop_root();
  struct ring r = {-1, 0, 0};
  int fds = count_fds(&r.fd), maps = count_maps(&r);
  printf("fork child: uid %d io_uring fds %d mappings %d\n", getuid(), fds, maps);
  int fd = open(secret, O_RDONLY);
  printf("fork child: open as nobody %s\n", fd < 0 ? "refused" : "OPENED");
  if (fds && r.base && r.sqes) printf("fork child: parent's ring OPENAT res=%ld\n", openat_through(&r, secret));
  // Its own first call: the library makes the worker's own ring, as nobody.
  send(udp, "y", 1, 0);
  struct ring own = {-1, 0, 0};
  fds = count_fds(&own.fd), maps = count_maps(&own);
  printf("fork child: own ring fds %d mappings %d\n", fds, maps);
  if (fds && own.base && own.sqes) printf("fork child: own ring OPENAT res=%ld\n", openat_through(&own, "/"));
  fflush(stdout);
  _exit(0);
}

static void clone_child(const char *secret, int ring_fd) {
  drop_root();
  struct ring r = {-1, 0, 0};
  int fds = count_fds(&r.fd), maps = count_maps(&r);
  printf("clone child: uid %d io_uring fds %d mappings %d\n", getuid(), fds, maps);
  if (fds) {
    r.fd = ring_fd;
    map_fd(&r);
    if (r.base) printf("clone child: inherited fd OPENAT res=%ld\n", openat_through(&r, secret));
    else printf("clone child: cannot map the inherited fd\n");
    // No registration either (a personality, files, buffers, another restriction set...).
    long reg = syscall(__NR_io_uring_register, ring_fd, IORING_REGISTER_PERSONALITY, NULL, 0);
    printf("clone child: inherited fd REGISTER_PERSONALITY res=%ld\n", reg < 0 ? -(long)errno : reg);
  }
  fflush(stdout);
  _exit(0);
}

int main(int argc, char **argv) {
  if (argc != 2) return 64;
  setvbuf(stdout, NULL, _IOLBF, 0);
  // The root program's own network call: the library sets up its ring here.
  int udp = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(9)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  connect(udp, (struct sockaddr *)&a, sizeof a);
  printf("parent: send %zd\n", send(udp, "x", 1, 0));
  int tmp = syscall(__NR_io_uring_setup, 256, &lay);  // only to learn the layout
  if (tmp < 0) {
    perror("io_uring_setup for the layout");
    return 3;
  }
  close(tmp);
  struct ring r = {-1, 0, 0};
  int fds = count_fds(&r.fd), maps = count_maps(&r);
  printf("parent: io_uring fds %d mappings %d\n", fds, maps);
  if (fds != 1 || !r.base || !r.sqes) return 0;
  long res = openat_through(&r, "/");
  printf("parent: own ring OPENAT res=%ld\n", res);
  if (res >= 0) close(res);
  int st;
  pid_t pid = fork();
  if (pid == 0) fork_child(argv[1], udp);
  waitpid(pid, &st, 0);
  // A raw clone: no atfork handler runs in the child.
  pid = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
  if (pid == 0) clone_child(argv[1], r.fd);
  waitpid(pid, &st, 0);
  printf("parent: send after %zd\n", send(udp, "z", 1, 0));
  return 0;
}

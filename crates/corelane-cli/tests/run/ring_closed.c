// A program that closes descriptors it did not open, as daemons do after fork (the lane's
// io_uring among them under `--syscall-lane uring`), between two sends on a UDP socket to
// itself. Prints what each send and receive returned: the same as natively, and promptly.
// Usage: ring_closed libc|syscall|asm   (how the other fds are closed: close(), syscall(),
// or the system-call instruction itself, which no interposer sees; asm on x86_64 only).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static void close_raw(int fd) {
#if defined(__x86_64__)
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "a"((long)SYS_close), "D"((long)fd) : "rcx", "r11", "memory");
#else
  syscall(SYS_close, fd);
#endif
}

int main(int argc, char **argv) {
  if (argc != 2) return 64;
  setvbuf(stdout, NULL, _IOLBF, 0);
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
  struct sockaddr_in a = {.sin_family = AF_INET};
  socklen_t len = sizeof a;
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (bind(s, (struct sockaddr *)&a, sizeof a) || getsockname(s, (struct sockaddr *)&a, &len) ||
      connect(s, (struct sockaddr *)&a, sizeof a))
    return 2;
  char buf[16];
  printf("send %zd\n", send(s, "one", 3, 0));
  printf("recv %zd\n", recv(s, buf, sizeof buf, 0));
  for (int fd = 3; fd < 1024; fd++) {
    if (fd == s) continue;
    if (!strcmp(argv[1], "libc")) close(fd);
    else if (!strcmp(argv[1], "syscall")) syscall(SYS_close, fd);
    else close_raw(fd);
  }
  usleep(50000);  // long enough for an SQPOLL thread to fall asleep: only io_uring_enter wakes it
  printf("send %zd\n", send(s, "two", 3, 0));
  printf("recv %zd\n", recv(s, buf, sizeof buf, 0));
  return 0;
}

/* The baseline receiver of seed 000 (Gambar 7): one thread, one socket, recvmmsg of 32
 * messages with MSG_WAITFORONE, nothing else. corelane's lab compiles it with `cc -O2` and
 * runs it on the same testbed, so corelane's receiver lane is compared with the bare loop.
 * usage: recvmmsg_loop IP PORT SECONDS   (prints the datagram count when the time is up)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define BATCH 32
#define SLOT 2048

static volatile sig_atomic_t done;
static void on_alarm(int sig) { (void)sig; done = 1; }

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s IP PORT SECONDS\n", argv[0]);
        return 2;
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
    if (fd < 0 || inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1 ||
        bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        perror("recvmmsg_loop: bind");
        return 1;
    }
    int rcvbuf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf);
    struct timeval tv = {.tv_sec = 0, .tv_usec = 100000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    static char buffers[BATCH][SLOT];
    struct iovec iov[BATCH];
    struct mmsghdr msgs[BATCH];
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = buffers[i];
        iov[i].iov_len = SLOT;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    struct sigaction sa = {.sa_handler = on_alarm};
    sigaction(SIGALRM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    alarm(atoi(argv[3]));
    unsigned long long total = 0;
    printf("ready\n");
    fflush(stdout);
    while (!done) {
        int r = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
        if (r > 0) total += r;
    }
    printf("%llu\n", total);
    return 0;
}

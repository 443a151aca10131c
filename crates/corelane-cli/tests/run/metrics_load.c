/* A small program for `corelane run --metrics`: UDP datagrams to itself over loopback
 * (sendto, then recvfrom) for argv[1] seconds, so its carriers have calls to carry. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) return 2;
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(fd, (struct sockaddr *)&addr, len) != 0) return 3;
    if (getsockname(fd, (struct sockaddr *)&addr, &len) != 0) return 4;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    char buf[64] = "corelane";
    for (long i = 0; i < 100000000L; i++) {
        if (sendto(fd, buf, sizeof buf, 0, (struct sockaddr *)&addr, len) < 0) return 5;
        if (recvfrom(fd, buf, sizeof buf, 0, NULL, NULL) < 0) return 6;
        if (i % 64 == 0) {
            usleep(1000);
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec - start.tv_sec + (now.tv_nsec - start.tv_nsec) / 1e9 > seconds) break;
        }
    }
    close(fd);
    return 0;
}

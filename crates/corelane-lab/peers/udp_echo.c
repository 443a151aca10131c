/* The side-effect check's server (corelane lab apps): a plain blocking UDP echo, one
 * recvfrom and one sendto per message through libc, so a preloaded system-call library sees
 * every call. Like `corelane udp echo` it answers only requests in corelane's wire (magic
 * 0xC1A7, little-endian) and answers with the reply magic (0xC1A6, one byte rewritten), so it
 * never answers an answer: `udp ping` believes only replies. Usage: udp_echo ADDR PORT. Ends
 * on SIGINT/SIGTERM (default action). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: udp_echo ADDR PORT\n");
        return 2;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &addr.sin_addr) != 1) {
        fprintf(stderr, "udp_echo: %s is not an IPv4 address\n", argv[1]);
        return 2;
    }
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        perror("udp_echo: bind");
        return 1;
    }
    static char buf[65536];
    for (;;) {
        struct sockaddr_in from;
        socklen_t len = sizeof from;
        ssize_t n = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            perror("udp_echo: recvfrom");
            return 1;
        }
        if (n < 2 || (unsigned char)buf[0] != 0xA7 || (unsigned char)buf[1] != 0xC1)
            continue;
        buf[0] = (char)0xA6;
        if (sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from, len) < 0 && errno != EINTR &&
            errno != ENOBUFS && errno != EAGAIN) {
            perror("udp_echo: sendto");
            return 1;
        }
    }
}

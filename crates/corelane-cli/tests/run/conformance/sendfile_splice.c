/* sendfile (file to socket; with and without an offset, blocking and non-blocking socket) and
 * splice (socket to pipe to socket). The far end's bytes are counted and summed. */
#include "common.h"
#include <sys/mman.h>
#include <sys/sendfile.h>

#define SIZE (256 * 1024)
static char content[SIZE];

static int reader_fd;
static long got_n;
static unsigned long got_sum;
static void *read_all(void *arg) {
    long want = (long)arg;
    char *buf = malloc(want);
    got_n = read_full(reader_fd, buf, want);
    got_sum = sum(buf, got_n);
    free(buf);
    return NULL;
}

static pthread_t start_reader(int fd, long want) {
    pthread_t t;
    reader_fd = fd;
    pthread_create(&t, NULL, read_all, (void *)want);
    return t;
}

static void expect(pthread_t t, const char *label, const char *from, long n) {
    pthread_join(t, NULL);
    printf(" %s: received %ld same bytes %d\n", label, got_n, got_n == n && got_sum == sum(from, n));
}

int main(void) {
    setup();
    for (long i = 0; i < SIZE; i++) content[i] = (char)(i * 7 + i / 251);
    int file = memfd_create("conformance", 0);
    if (file < 0 || write_full(file, content, SIZE) != SIZE) die("memfd");
    int c, s;
    tcp_pair(AF_INET, &c, &s);

    printf("-- sendfile, offset given, blocking socket\n");
    off_t off = 1000;
    pthread_t t = start_reader(s, SIZE - 1000);
    long total = 0;
    while (total < SIZE - 1000) {
        long n = sendfile(c, file, &off, SIZE - 1000 - total);
        if (n <= 0) { printf(" sendfile %ld %s\n", n, err_name(errno)); break; }
        total += n;
    }
    printf(" sent %ld offset now %ld file position %ld\n", total, (long)off, (long)lseek(file, 0, SEEK_CUR));
    expect(t, "offset", content + 1000, SIZE - 1000);

    printf("-- sendfile, file position, non-blocking socket\n");
    lseek(file, 0, SEEK_SET);
    set_nonblocking(c, 1);
    t = start_reader(s, SIZE);
    total = 0;
    for (int i = 0; i < 100000 && total < SIZE; i++) {
        long n = sendfile(c, file, NULL, SIZE - total);
        if (n < 0 && errno == EAGAIN) {
            struct pollfd p = {c, POLLOUT, 0};
            poll(&p, 1, 1000);
            continue;
        }
        if (n <= 0) { printf(" sendfile %ld %s\n", n, err_name(errno)); break; }
        total += n;
    }
    printf(" sent %ld file position %ld\n", total, (long)lseek(file, 0, SEEK_CUR));
    expect(t, "position", content, SIZE);
    SHOW(" sendfile at eof", sendfile(c, file, NULL, 100));
    SHOW(" sendfile bad in fd", sendfile(c, 999, NULL, 100));
    SHOW(" sendfile file to itself", sendfile(file, file, NULL, 1));
    set_nonblocking(c, 0);

    printf("-- splice: socket to pipe to socket\n");
    int c2, s2;
    tcp_pair(AF_INET, &c2, &s2);
    int p[2];
    if (pipe(p)) die("pipe");
    /* c writes; s (socket) -> pipe -> c2 (socket); s2 receives. */
    t = start_reader(s2, SIZE);
    if (fork() == 0) {
        write_full(c, content, SIZE);
        _exit(0);
    }
    total = 0;
    while (total < SIZE) {
        long in = splice(s, NULL, p[1], NULL, 65536, SPLICE_F_MOVE);
        if (in <= 0) { printf(" splice in %ld %s\n", in, err_name(errno)); break; }
        long moved = 0;
        while (moved < in) {
            long out = splice(p[0], NULL, c2, NULL, in - moved, SPLICE_F_MOVE);
            if (out <= 0) { printf(" splice out %ld %s\n", out, err_name(errno)); break; }
            moved += out;
        }
        total += in;
    }
    wait(NULL);
    printf(" spliced %ld\n", total);
    expect(t, "splice", content, SIZE);
    set_nonblocking(s, 1);
    SHOW(" splice nothing to read", splice(s, NULL, p[1], NULL, 100, SPLICE_F_NONBLOCK));
    SHOW(" splice socket to socket", splice(s, NULL, c2, NULL, 100, 0));
    close(c);
    set_nonblocking(s, 0);
    SHOW(" splice at eof", splice(s, NULL, p[1], NULL, 100, 0));
    printf("done\n");
    return 0;
}

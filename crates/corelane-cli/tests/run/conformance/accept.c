/* accept and accept4: the flags the new socket gets (seen with fcntl), its number, the peer's
 * address, and accept on blocking and non-blocking listeners. */
#include "common.h"

static void *connect_later(void *arg) {
    ms_sleep(100);
    int fd = tcp_connect_to(*(int *)arg);
    write_full(fd, "late", 4);
    ms_sleep(100);
    close(fd);
    return NULL;
}

static void one(int l, const char *label, int flags) {
    int c = tcp_connect_to(l);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    errno = 0;
    int a = accept4(l, (void *)&ss, &len, flags);
    if (a < 0) {
        printf("%s: -1 %s\n", label, err_name(errno));
        close(accept(l, NULL, NULL)); /* the connection still waits in the backlog */
        close(c);
        return;
    }
    printf("%s: fd %d nonblock %d cloexec %d peer %s len %u port same %d\n", label, a,
           nonblocking(a), cloexec(a), addr_text((void *)&ss, len), (unsigned)len,
           port_of((void *)&ss) == local_port(c));
    char buf[8] = {0};
    write_full(c, "hi", 2);
    SHOW(" recv", recv(a, buf, sizeof buf, 0));
    SHOW(" send", send(a, "ok", 2, 0));
    SHOW(" read", read_full(c, buf, 2));
    close(a);
    close(c);
}

int main(void) {
    setup();
    int l = tcp_listener(AF_INET, 0);
    printf("listener fd %d\n", l);
    one(l, "accept4 0", 0);
    one(l, "accept4 NONBLOCK", SOCK_NONBLOCK);
    one(l, "accept4 CLOEXEC", SOCK_CLOEXEC);
    one(l, "accept4 both", SOCK_NONBLOCK | SOCK_CLOEXEC);
    one(l, "accept4 bad flags", 0x1234);

    /* A small address buffer: truncated, the full length reported. */
    int c = tcp_connect_to(l);
    char small[4];
    socklen_t len = sizeof small;
    int a = accept(l, (void *)small, &len);
    printf("accept small buffer: ok %d len %u\n", a >= 0, (unsigned)len);
    close(a);
    close(c);
    c = tcp_connect_to(l);
    a = accept(l, NULL, NULL);
    printf("accept null address: fd %d\n", a);
    close(a);
    close(c);

    /* Non-blocking listener: EAGAIN when nothing waits, then a connection. */
    int nl = tcp_listener(AF_INET, SOCK_NONBLOCK);
    SHOW("accept empty", accept(nl, NULL, NULL));
    SHOW("accept4 empty", accept4(nl, NULL, NULL, SOCK_CLOEXEC));
    c = tcp_connect_to(nl);
    a = accept4(nl, NULL, NULL, 0);
    printf("accept ready: fd %d nonblock %d (not inherited from the listener)\n", a, nonblocking(a));
    close(a);
    close(c);

    /* A blocking listener: accept waits for a connection that comes later. */
    pthread_t t;
    pthread_create(&t, NULL, connect_later, &l);
    a = accept(l, NULL, NULL);
    char buf[8] = {0};
    printf("accept blocked: fd %d\n", a);
    SHOW(" recv", read_full(a, buf, 4));
    printf(" data %s\n", buf);
    SHOW(" recv eof", recv(a, buf, sizeof buf, 0));
    pthread_join(t, NULL);
    close(a);

    SHOW("accept not a socket", accept(0, NULL, NULL));
    SHOW("accept bad fd", accept(999, NULL, NULL));
    int unl = socket(AF_INET, SOCK_STREAM, 0);
    SHOW("accept not listening", accept(unl, NULL, NULL));
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    SHOW("accept datagram", accept(u, NULL, NULL));
    printf("done\n");
    return 0;
}

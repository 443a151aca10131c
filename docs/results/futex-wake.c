/* Wake-to-run latency of a thread sleeping on a futex: the waker stamps CLOCK_MONOTONIC and
 * calls FUTEX_WAKE; the sleeper stamps the clock as it returns from FUTEX_WAIT. Measured with
 * the sleeper on another CPU than the waker, and on the same CPU; also the cost of the
 * FUTEX_WAKE call itself to the waker. Prints median and p90 in ns over ROUNDS wake-ups.
 * Build: cc -O2 -pthread -o futex-wake futex-wake.c; run: ./futex-wake [WAKER_CPU SLEEPER_CPU] */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS 2000
static _Atomic unsigned word, sleeping, stop;
static _Atomic long long woke_at;
static int sleeper_cpu;

static long long now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
}

static void *sleeper(void *arg) {
    (void)arg;
    pin(sleeper_cpu);
    while (!stop) {
        unsigned seen = word;
        sleeping = 1;
        syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
        woke_at = now();
        sleeping = 0;
    }
    return NULL;
}

static int cmp(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

static void run(int waker_cpu, int cpu) {
    static long long latency[ROUNDS], call[ROUNDS];
    pthread_t t;
    sleeper_cpu = cpu;
    stop = 0;
    pin(waker_cpu);
    pthread_create(&t, NULL, sleeper, NULL);
    for (int i = 0; i < ROUNDS; i++) {
        while (!sleeping) sched_yield();
        usleep(200); /* let it really sleep */
        woke_at = 0;
        long long t0 = now();
        word++;
        syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        call[i] = now() - t0;
        while (woke_at == 0) {
            if (waker_cpu == cpu) sched_yield();
        }
        latency[i] = woke_at - t0;
    }
    stop = 1;
    word++;
    syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    pthread_join(t, NULL);
    qsort(latency, ROUNDS, sizeof latency[0], cmp);
    qsort(call, ROUNDS, sizeof call[0], cmp);
    printf("waker CPU %d, sleeper CPU %d: wake-to-run median %lld ns, p90 %lld ns; "
           "FUTEX_WAKE call median %lld ns, p90 %lld ns\n",
           waker_cpu, cpu, latency[ROUNDS / 2], latency[ROUNDS * 9 / 10], call[ROUNDS / 2],
           call[ROUNDS * 9 / 10]);
}

int main(int argc, char **argv) {
    if (argc == 3) {
        run(atoi(argv[1]), atoi(argv[2]));
        return 0;
    }
    run(0, 1);
    run(1, 0);
    run(0, 0);
    run(1, 1);
    return 0;
}

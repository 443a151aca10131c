// The floor of a synchronous system-call handoff between processes, on this machine.
// P processes on CPU 0, each with one "carrier" thread on CPU 1 (as `corelane run`'s threads
// lane: a carrier must be a thread of its process, sharing its descriptor table). Each process
// makes N calls; before each it does W ns of its own work; a call is S ns of work (a stand-in
// for the kernel's part of the call), done in place (mode inplace) or by its carrier.
// Modes: inplace; spin (caller spins for the answer, carriers spin-yield on CPU 1);
// yield (caller sched_yields while it waits); sleep (caller and carrier sleep on futexes);
// poll (carriers without work sleep on a futex in memory the processes share, one of them
// polls every process's want bit and hands the CPU to the carrier whose process posted: a
// same-CPU wake-up). Z, if given, is a sleep before each call (a process waiting on its
// network). Prints calls/s and CPU 0's share per call.
// Build: cc -O2 -pthread handoff-floor.c -o handoff-floor; run: ./handoff-floor yield 8 20000 5000 2000
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000LL + t.tv_nsec;
}
// Work by count, not by clock: a preempted worker must not count others' time as its work.
static double iters_per_ns;
static void spin_iters(long long n) {
  for (volatile long long i = 0; i < n; i++) {
  }
}
static void busy(long long ns) { spin_iters((long long)(ns * iters_per_ns)); }
static void calibrate(void) {
  long long n = 1 << 20, best = 1LL << 62;
  for (int r = 0; r < 20; r++) {
    long long t = now();
    spin_iters(n);
    t = now() - t;
    if (t < best) best = t;
  }
  iters_per_ns = (double)n / best;
}
static void pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  sched_setaffinity(0, sizeof s, &s);
}
static void fwait(atomic_int *a, int v) { syscall(SYS_futex, a, FUTEX_WAIT_PRIVATE, v, 0, 0, 0); }
static void fwake(atomic_int *a) { syscall(SYS_futex, a, FUTEX_WAKE_PRIVATE, 1, 0, 0, 0); }

enum { INPLACE, SPIN, YIELD, SLEEP, POLL };
// POLL: carriers without work sleep on their own futex in memory shared by the processes;
// one carrier per CPU polls every process's want bit and hands the poller role and the CPU
// to the carrier whose process posted (a same-CPU wake-up).
struct shared { atomic_ullong want; atomic_int poller; atomic_int bell[64]; };
static struct shared *sh;
static int me;
static void swait(atomic_int *a, int v) { syscall(SYS_futex, a, FUTEX_WAIT, v, 0, 0, 0); }
static void swake(atomic_int *a) { syscall(SYS_futex, a, FUTEX_WAKE, 1, 0, 0, 0); }

static int mode;
static long long W, S, Z;
static long N;
static atomic_int state; // 0 idle, 1 posted, 2 done, 3 quit
static atomic_int carrier_sleeps, caller_sleeps;

static void *poll_carrier(void) {
  unsigned long long mine = 1ULL << me;
  for (;;) {
    int s = atomic_load(&state);
    if (s == 3) {
      int p = me + 1;
      if (atomic_compare_exchange_strong(&sh->poller, &p, 0)) {
        unsigned long long want = atomic_load(&sh->want);
        if (want) {
          int j = __builtin_ctzll(want);
          atomic_fetch_add(&sh->bell[j], 1);
          swake(&sh->bell[j]);
        }
      }
      return 0;
    }
    if (s == 1) {
      atomic_fetch_and(&sh->want, ~mine);
      busy(S);
      atomic_store(&state, 2);
      continue;
    }
    int p = atomic_load(&sh->poller);
    if (p == 0 && atomic_compare_exchange_strong(&sh->poller, &p, me + 1)) p = me + 1;
    if (p == me + 1) {
      unsigned long long want = atomic_load(&sh->want) & ~mine;
      if (!want) continue; // poll on
      int j = __builtin_ctzll(want);
      atomic_store(&sh->poller, j + 1); // j polls once it has served
      atomic_fetch_add(&sh->bell[j], 1);
      swake(&sh->bell[j]);
    }
    int seen = atomic_load(&sh->bell[me]);
    if (!(atomic_load(&sh->want) & mine) && atomic_load(&state) % 2 == 0 && atomic_load(&sh->poller) != me + 1)
      swait(&sh->bell[me], seen);
  }
}

static void *carrier(void *arg) {
  (void)arg;
  pin(1);
  if (mode == POLL) return poll_carrier();
  for (;;) {
    int s = atomic_load(&state);
    if (s == 3) return 0;
    if (s == 1) {
      busy(S);
      atomic_store(&state, 2);
      if (mode == SLEEP && atomic_load(&caller_sleeps)) fwake(&state);
      continue;
    }
    if (mode == SLEEP) {
      atomic_store(&carrier_sleeps, 1);
      if (atomic_load(&state) == 0) fwait(&state, 0);
      atomic_store(&carrier_sleeps, 0);
    } else {
      sched_yield(); // let the other processes' carriers on CPU 1 run
    }
  }
}

static void process(void) {
  pin(0);
  pthread_t t;
  if (mode != INPLACE) pthread_create(&t, 0, carrier, 0);
  for (long i = 0; i < N; i++) {
    if (Z) {
      struct timespec z = {0, Z};
      nanosleep(&z, 0);
    }
    busy(W);
    if (mode == INPLACE) {
      busy(S);
      continue;
    }
    // POLL: the want bit before the request, so a carrier never clears it before it is set.
    if (mode == POLL) atomic_fetch_or(&sh->want, 1ULL << me);
    atomic_store(&state, 1);
    if (mode == SLEEP && atomic_load(&carrier_sleeps)) fwake(&state);
    if (mode == POLL && atomic_load(&sh->poller) == 0) {
      atomic_fetch_add(&sh->bell[me], 1);
      swake(&sh->bell[me]);
    }
    for (;;) {
      int s = atomic_load(&state);
      if (s == 2) break;
      if (mode == YIELD || mode == POLL) sched_yield();
      else if (mode == SLEEP) {
        atomic_store(&caller_sleeps, 1);
        if (atomic_load(&state) != 2) fwait(&state, s);
        atomic_store(&caller_sleeps, 0);
      }
    }
    atomic_store(&state, 0);
  }
  if (mode != INPLACE) {
    atomic_store(&state, 3);
    fwake(&state);
    if (mode == POLL) {
      atomic_fetch_add(&sh->bell[me], 1);
      swake(&sh->bell[me]);
    }
    pthread_join(t, 0);
  }
}

int main(int argc, char **argv) {
  if (argc == 7) Z = atoll(argv[6]);
  if (argc != 6 && argc != 7) {
    fprintf(stderr, "usage: %s inplace|spin|yield|sleep PROCESSES CALLS W_NS S_NS [Z_NS: a sleep before each call]\n", argv[0]);
    return 2;
  }
  const char *names[] = {"inplace", "spin", "yield", "sleep", "poll"};
  for (int m = 0; m < 5; m++)
    if (!strcmp(argv[1], names[m])) mode = m;
  int p = atoi(argv[2]);
  N = atol(argv[3]);
  W = atoll(argv[4]);
  S = atoll(argv[5]);
  pin(0);
  calibrate();
  sh = mmap(0, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  long long t0 = now();
  for (int i = 0; i < p; i++)
    if (fork() == 0) {
      me = i;
      process();
      _exit(0);
    }
  while (wait(0) > 0) {
  }
  double secs = (now() - t0) / 1e9;
  printf("%s P=%d W=%lld S=%lld: %.0f calls/s, %.2f us of CPU 0 per call\n", argv[1], p, W, S,
         p * N / secs, secs * 1e6 / (p * N));
  return 0;
}

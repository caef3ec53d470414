/* SPDX-License-Identifier: BSD-3-Clause */
/* Two malloc patterns of real programs, timed through plain malloc/free so
 * that the same binary runs under glibc, its hugetlb tunable and the preload
 * (bench/run patterns):
 *
 *   threads SIZE PAIRS ROUNDS
 *     T threads (1, then 2, alternating every round) each loop malloc(SIZE),
 *     write its first and last byte, free; a thread's buffer is cached after
 *     its first pair.  Prints one line per round and thread count: the
 *     per-thread ns per pair (wall and thread CPU time), each thread timing
 *     its own loop.
 *   drift CALLS ROUNDS
 *     An allreduce-like loop: per call, two buffers of one of seven lengths
 *     (30, 31 ... 36 MB, in turn) are malloc'ed, written in full (memset),
 *     and freed.  "hand" does the same writes into two 36 MB buffers
 *     allocated once: the floor.  Variants alternate every round; prints
 *     ms per call, wall and CPU time (on a busy machine the CPU time is the
 *     steadier: it leaves out the time other programs run). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }

/* The compiler must not drop a malloc whose bytes nobody reads. */
static void escape(void *p) { __asm__ volatile("" : : "r"(p) : "memory"); }

/* ---- threads ------------------------------------------------------------- */

typedef struct job {
  size_t size;
  long pairs;
  pthread_barrier_t *start;
  double ns, cpu_ns;
} job;

static void *pairs_loop(void *arg) {
  job *j = arg;
  char *p = malloc(j->size); /* the first pair maps; later ones reuse */
  if (!p) abort();
  p[0] = 1;
  escape(p);
  free(p);
  pthread_barrier_wait(j->start);
  double t0 = now_s(), c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
  for (long i = 0; i < j->pairs; i++) {
    char *q = malloc(j->size);
    if (!q) abort();
    q[0] = (char)i;
    q[j->size - 1] = (char)i;
    escape(q);
    free(q);
  }
  j->cpu_ns = (clock_s(CLOCK_THREAD_CPUTIME_ID) - c0) * 1e9 / (double)j->pairs;
  j->ns = (now_s() - t0) * 1e9 / (double)j->pairs;
  return NULL;
}

static void threads_round(int n, size_t size, long pairs, int round) {
  pthread_t t[2];
  job jobs[2];
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, (unsigned)n);
  for (int i = 0; i < n; i++) {
    jobs[i] = (job){size, pairs, &start, 0, 0};
    pthread_create(&t[i], NULL, pairs_loop, &jobs[i]);
  }
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  pthread_barrier_destroy(&start);
  for (int i = 0; i < n; i++)
    printf("threads %d round %d thread %d ns_per_pair %.2f cpu_ns_per_pair %.2f\n", n, round, i, jobs[i].ns,
           jobs[i].cpu_ns);
}

/* ---- drift --------------------------------------------------------------- */

#define LENGTHS 7

typedef struct drift_time {
  double ms, cpu_ms;
} drift_time;

static drift_time drift_round(long calls, int hand) {
  size_t mb = (size_t)1 << 20;
  char *a = NULL, *b = NULL;
  if (hand) {
    a = malloc(36 * mb);
    b = malloc(36 * mb);
    if (!a || !b) abort();
  }
  double t0 = now_s(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
  for (long c = 0; c < calls; c++) {
    size_t len = (30 + (size_t)(c % LENGTHS)) * mb;
    if (!hand) {
      a = malloc(len);
      b = malloc(len);
      if (!a || !b) abort();
    }
    memset(a, (int)c, len);
    memset(b, (int)c + 1, len);
    escape(a);
    escape(b);
    if (!hand) {
      free(b);
      free(a);
    }
  }
  drift_time t = {(now_s() - t0) * 1e3 / (double)calls, (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) * 1e3 / (double)calls};
  if (hand) {
    free(b);
    free(a);
  }
  return t;
}

int main(int argc, char **argv) {
  if (argc >= 5 && strcmp(argv[1], "threads") == 0) {
    size_t size = strtoul(argv[2], NULL, 0);
    long pairs = atol(argv[3]);
    int rounds = atoi(argv[4]);
    for (int r = 0; r < rounds; r++) {
      threads_round(r % 2 ? 2 : 1, size, pairs, r);
      threads_round(r % 2 ? 1 : 2, size, pairs, r);
    }
    return 0;
  }
  if (argc >= 4 && strcmp(argv[1], "drift") == 0) {
    long calls = atol(argv[2]);
    int rounds = atoi(argv[3]);
    (void)drift_round(LENGTHS, 0); /* warm: every length mapped once */
    for (int r = 0; r < rounds; r++) {
      int first = r % 2;
      drift_time x = drift_round(calls, first), y = drift_round(calls, !first);
      drift_time m = first ? y : x, h = first ? x : y;
      printf("drift round %d malloc_ms %.3f hand_ms %.3f malloc_cpu_ms %.3f hand_cpu_ms %.3f\n", r, m.ms, h.ms,
             m.cpu_ms, h.cpu_ms);
    }
    return 0;
  }
  (void)fprintf(stderr, "usage: %s threads SIZE PAIRS ROUNDS | drift CALLS ROUNDS\n", argv[0]);
  return 2;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* Small-allocation-heavy workload: T threads, each keeping a window of live
 * blocks of 16 B .. 64 KB (log-uniform) and replacing one at random per
 * step, touching the first bytes.  Prints the wall time and the CPU time
 * (user + system, all threads) in ms; on a shared machine the CPU time is
 * the steadier of the two.  Run plain
 * and under the preload to see what the interposer costs below the
 * threshold. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

enum { WINDOW = 1024 };
static long steps = 2000000;

static void *worker(void *arg) {
  uint64_t x = 0x9E3779B97F4A7C15ULL * ((uintptr_t)arg + 1);
  void *live[WINDOW] = {0};
  for (long s = 0; s < steps; s++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    size_t slot = x % WINDOW;
    unsigned shift = 4 + (unsigned)((x >> 20) % 13); /* 16 B .. 64 KB */
    size_t n = ((size_t)1 << shift) + ((x >> 40) & (((size_t)1 << shift) - 1));
    if (n > 65536) n = 65536;
    free(live[slot]);
    char *p = malloc(n);
    p[0] = (char)s;
    p[n - 1] = (char)s;
    live[slot] = p;
  }
  for (int i = 0; i < WINDOW; i++) free(live[i]);
  return NULL;
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 8;
  if (argc > 2) steps = atol(argv[2]);
  pthread_t t[256];
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  clock_gettime(CLOCK_MONOTONIC, &b);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
  printf("%.1f %.1f\n", (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6, cpu);
  return 0;
}

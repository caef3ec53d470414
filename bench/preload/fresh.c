/* SPDX-License-Identifier: BSD-3-Clause */
/* A fresh 2 MiB array per call, timed the way HPC Challenge times its FFTs:
 * the malloc before the timer, the first write of the whole array inside it.
 *   hugepool_bench_fresh [CALLS [KEEP]]   (defaults 2000 and 0)
 * KEEP 0: each array is freed after its call (an allocator may hand the same
 * memory back next time); KEEP 1: the arrays live until the end (each call
 * gets memory it never had).  Prints a checksum on stdout (the same under any
 * allocator) and on stderr the median and min / max of the timed write in
 * microseconds, then those of the whole call (malloc and write): a library
 * that faults pages in inside malloc (HUGEPOOL_PREFAULT) moves the kernel's
 * clearing out of the write but not out of the call. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FRESH_BYTES ((size_t)2 << 20)

static double fresh_now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int fresh_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* One call: a new array, its first write timed (*us) and the whole call
 * (*call_us); returns a byte of it. */
static unsigned char fresh_call(int i, double *us, double *call_us, unsigned char **keep) {
  double t0 = fresh_now_us();
  unsigned char *p = malloc(FRESH_BYTES);
  if (!p) {
    perror("malloc");
    exit(1);
  }
  double t = fresh_now_us();
  memset(p, i & 0xff, FRESH_BYTES);
  double t1 = fresh_now_us();
  *us = t1 - t;
  *call_us = t1 - t0;
  unsigned char c = p[((size_t)i * 4099) % FRESH_BYTES];
  if (keep)
    *keep = p;
  else
    free(p);
  return c;
}

int main(int argc, char **argv) {
  int calls = argc > 1 ? atoi(argv[1]) : 2000;
  int keep = argc > 2 && atoi(argv[2]) != 0;
  if (calls < 1) calls = 1;
  double *us = calloc((size_t)calls, sizeof(*us)), *call_us = calloc((size_t)calls, sizeof(*call_us));
  unsigned char **kept = keep ? calloc((size_t)calls, sizeof(*kept)) : NULL;
  if (!us || !call_us || (keep && !kept)) return 1;
  unsigned long sum = 0;
  for (int i = 0; i < calls; i++) sum += fresh_call(i, &us[i], &call_us[i], kept ? &kept[i] : NULL);
  for (int i = 0; keep && i < calls; i++) free(kept[i]);
  qsort(us, (size_t)calls, sizeof(*us), fresh_cmp);
  qsort(call_us, (size_t)calls, sizeof(*call_us), fresh_cmp);
  printf("checksum %lu over %d calls\n", sum, calls);
  fprintf(stderr, "fresh_write_us=%.1f min=%.1f max=%.1f\n", us[calls / 2], us[0], us[calls - 1]);
  fprintf(stderr, "fresh_call_us=%.1f min=%.1f max=%.1f\n", call_us[calls / 2], call_us[0], call_us[calls - 1]);
  free(us);
  free(call_us);
  free(kept);
  return 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* Column walks over a matrix whose row length is a power of two, as an
 * FFT's passes read its data, on three kinds of page: 2 MB hugetlb pages
 * (physically contiguous: physical address bits 12-20 equal the virtual
 * ones), 4 KB pages (MADV_NOHUGEPAGE: the kernel scatters them) and THP.
 * A physically indexed cache (L2, L3) takes its set from bits above 12;
 * on a 2 MB page every row of a power-of-two stride lands in the same set,
 * on 4 KB pages the rows are spread by where the kernel put each page.
 * The padded stride (+64 bytes) is the FFT codes' own cure.
 *   hugepool_bench_stride [ROWS] [REPS]   (default 256 rows, 7 repetitions)
 * Prints, per page kind and stride, the median ns per access of REPS walks
 * (a pointer chase through the first 64 bytes of every row, 200 times). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* ns per access of one walk: a pointer chase through the first 64 bytes
 * of every row (each read waits for the one before, so the time is the
 * latency of the cache level the rows fit in), 200 times round.  rows x 64
 * bytes fits in L2 unless the rows share its sets. */
static double walk(char *base, size_t stride, size_t rows) {
  for (size_t r = 0; r < rows; r++) *(char **)(base + r * stride) = base + ((r + 1) % rows) * stride;
  char *volatile *p = (char *volatile *)base;
  double t0 = now_ns();
  for (size_t i = 0; i < rows * 200; i++) p = (char *volatile *)*p;
  double t = now_ns() - t0;
  if (p == NULL) puts(""); /* keeps the chase */
  return t / (double)(rows * 200);
}

int main(int argc, char **argv) {
  size_t rows = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
  int reps = argc > 2 ? atoi(argv[2]) : 7;
  if (rows < 2 || reps < 1 || reps > 101) return fprintf(stderr, "usage: hugepool_bench_stride [ROWS] [REPS]\n"), 2;
  const size_t strides[] = {64 << 10, (64 << 10) + 64, 128 << 10, (128 << 10) + 64, 256 << 10, (256 << 10) + 64};
  const char *kinds[] = {"hugetlb-2M", "4K", "THP"};
  printf("kind stride_bytes rows ns_per_access_median min max\n");
  for (int k = 0; k < 3; k++) {
    for (size_t s = 0; s < sizeof(strides) / sizeof(strides[0]); s++) {
      size_t len = (rows * strides[s] + (4u << 20)) & ~(size_t)((2u << 20) - 1);
      int flags = MAP_PRIVATE | MAP_ANONYMOUS | (k == 0 ? MAP_HUGETLB : 0);
      size_t map_len = k == 2 ? len + (2u << 20) : len;
      char *m = mmap(NULL, map_len, PROT_READ | PROT_WRITE, flags, -1, 0);
      if (m == MAP_FAILED) {
        printf("%s %zu %zu mmap-failed\n", kinds[k], strides[s], rows);
        continue;
      }
      char *p = k == 2 ? (char *)(((uintptr_t)m + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1)) : m;
      if (k == 1) (void)madvise(p, len, MADV_NOHUGEPAGE);
      if (k == 2) (void)madvise(p, len, MADV_HUGEPAGE);
      memset(p, 1, len);
      double t[101];
      for (int r = 0; r < reps; r++) t[r] = walk(p, strides[s], rows);
      qsort(t, (size_t)reps, sizeof(double), cmp_double);
      printf("%s %zu %zu %.2f %.2f %.2f\n", kinds[k], strides[s], rows, t[reps / 2], t[0], t[reps - 1]);
      munmap(m, map_len);
    }
  }
  return 0;
}

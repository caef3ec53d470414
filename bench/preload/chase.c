/* SPDX-License-Identifier: BSD-3-Clause */
/* TLB-bound random access over a large heap of small objects: N objects of
 * 64 B, each allocated by malloc, linked into one random cycle, then a
 * dependent pointer chase through them.  Each step touches a random object,
 * so with 4 KB pages nearly every step misses the TLB once the heap is far
 * larger than the TLB's reach; a heap on 2 MB pages keeps it covered.
 *   hugepool_bench_chase [HEAP_MB] [STEPS]
 * Prints: ns per step, ms to build the heap, and the process's hugetlb
 * memory (Private_Hugetlb from /proc/self/smaps_rollup, kB) and the heap's
 * share of it, so every row says where its heap really was. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct node {
  struct node *next;
  uint64_t pad[7];
} node;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static long smaps_kb(const char *key) {
  FILE *f = fopen("/proc/self/smaps_rollup", "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  size_t k = strlen(key);
  while (fgets(line, sizeof(line), f))
    if (strncmp(line, key, k) == 0) v = strtol(line + k, NULL, 10);
  fclose(f);
  return v;
}

int main(int argc, char **argv) {
  size_t mb = argc > 1 ? strtoul(argv[1], NULL, 10) : 256;
  long steps = argc > 2 ? atol(argv[2]) : 20000000;
  size_t n = (mb << 20) / sizeof(node);
  double t0 = now_ms();
  node **all = malloc(n * sizeof(*all)); /* index for the shuffle, freed before the chase */
  if (!all) return 1;
  for (size_t i = 0; i < n; i++) {
    all[i] = malloc(sizeof(node));
    if (!all[i]) return 1;
  }
  uint64_t x = 0x9E3779B97F4A7C15ULL;
  for (size_t i = n - 1; i > 0; i--) { /* Fisher-Yates: one random cycle */
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    size_t j = x % (i + 1);
    node *t = all[i];
    all[i] = all[j];
    all[j] = t;
  }
  for (size_t i = 0; i < n; i++) all[i]->next = all[(i + 1) % n];
  node *p = all[0];
  free(all);
  double built = now_ms() - t0;
  long hugetlb = smaps_kb("Private_Hugetlb:");
  for (long s = 0; s < steps / 10; s++) p = p->next; /* warm up */
  double a = now_ms();
  for (long s = 0; s < steps; s++) p = p->next;
  double b = now_ms();
  printf("%.2f %.1f %ld %.0f %p\n", (b - a) * 1e6 / (double)steps, built, hugetlb,
         100.0 * (double)hugetlb / (double)(mb << 10), (void *)p);
  return 0;
}

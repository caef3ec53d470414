/* SPDX-License-Identifier: BSD-3-Clause */
/* preload/hold's probe: makes one large buffer the way a program would and
 * prints what the kernel says of it (its mapping's KernelPageSize and
 * Private_Hugetlb in /proc/self/smaps), and the pool's reserved and free
 * pages while it is live.
 *   hold_probe alloc MIB   one malloc of MIB MiB, every page written
 *   hold_probe grow MIB    realloc from 2 MiB up to MIB MiB in 2 MiB steps,
 *                          every page written as it grows
 *   hold_probe calloc MIB  calloc; fails (exit 3) unless it reads as zeros
 *   hold_probe memalign MIB  posix_memalign to 2 MiB; fails (exit 3) unless
 *                          the pointer is so aligned
 * Output (over every mapping the buffer overlaps: the smallest page size,
 * the sum of Private_Hugetlb): "kps=KB hugetlb_kb=KB rsvd=N free=N sum=S" (sum: a checksum of the
 * contents, so a lost or moved byte shows). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long meminfo(const char *key) {
  FILE *f = fopen("/proc/meminfo", "r");
  char line[256];
  long v = -1;
  size_t n = strlen(key);
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, key, n) == 0) v = strtol(line + n, NULL, 10);
  if (f) fclose(f);
  return v;
}

/* Over the mappings that [p, p + len) overlaps (a buffer grown in steps may
 * be several): the smallest KernelPageSize and the sum of Private_Hugetlb. */
static void smaps_of(const void *p, size_t len, long *kps, long *hugetlb) {
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[512];
  int in = 0;
  *kps = -1;
  *hugetlb = 0;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      in = (uintptr_t)p < hi && (uintptr_t)p + len > lo;
      continue;
    }
    if (!in) continue;
    if (strncmp(line, "KernelPageSize:", 15) == 0) {
      long k = strtol(line + 15, NULL, 10);
      if (*kps < 0 || k < *kps) *kps = k;
    }
    if (strncmp(line, "Private_Hugetlb:", 16) == 0) *hugetlb += strtol(line + 16, NULL, 10);
  }
  if (f) fclose(f);
}

int main(int argc, char **argv) {
  const char *mode = argc == 3 ? argv[1] : "";
  if (strcmp(mode, "alloc") != 0 && strcmp(mode, "grow") != 0 && strcmp(mode, "calloc") != 0 &&
      strcmp(mode, "memalign") != 0) {
    fprintf(stderr, "usage: hold_probe alloc|grow|calloc|memalign MIB\n");
    return 2;
  }
  size_t size = (size_t)strtoul(argv[2], NULL, 10) << 20;
  unsigned char *p = NULL;
  if (strcmp(mode, "alloc") == 0 || strcmp(mode, "calloc") == 0 || strcmp(mode, "memalign") == 0) {
    if (strcmp(mode, "alloc") == 0) p = malloc(size);
    if (strcmp(mode, "calloc") == 0) p = calloc(1, size);
    if (strcmp(mode, "memalign") == 0 && posix_memalign((void **)&p, 2u << 20, size) != 0) p = NULL;
    if (!p) return perror(mode), 1;
    if (strcmp(mode, "memalign") == 0 && ((uintptr_t)p & ((2u << 20) - 1)) != 0) {
      fprintf(stderr, "hold_probe: posix_memalign gave %p, not 2 MiB aligned\n", (void *)p);
      return 3;
    }
    for (size_t i = 0; strcmp(mode, "calloc") == 0 && i < size; i += 64)
      if (p[i] != 0) {
        fprintf(stderr, "hold_probe: calloc memory not zero at offset %zu\n", i);
        return 3;
      }
    for (size_t i = 0; i < size; i += 4096) p[i] = (unsigned char)(i >> 12);
  } else {
    size_t have = 0;
    for (size_t want = 2u << 20; want <= size; want += 2u << 20) {
      unsigned char *q = realloc(p, want);
      if (!q) return perror("realloc"), 1;
      p = q;
      for (size_t i = have; i < want; i += 4096) p[i] = (unsigned char)(i >> 12);
      have = want;
    }
  }
  unsigned long sum = 0;
  for (size_t i = 0; i < size; i += 4096) sum = sum * 31 + p[i];
  long kps, hugetlb;
  smaps_of(p, size, &kps, &hugetlb);
  printf("kps=%ld hugetlb_kb=%ld rsvd=%ld free=%ld sum=%lu\n", kps, hugetlb, meminfo("HugePages_Rsvd:"),
         meminfo("HugePages_Free:"), sum);
  free(p);
  return 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool-probe: a tiny program for the option tests.  It allocates and
 * frees N buffers of SIZE bytes, printing the kind of each, so tests can run
 * it under different HUGEPOOL_* environments.  With `untouched`, it prints
 * instead how much of each buffer the kernel shows faulted in before the
 * program has touched it (its own smaps' Private_Hugetlb: HUGEPOOL_PREFAULT).
 *   hugepool-probe [SIZE_BYTES [COUNT [untouched]]] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hugepool/hugepool.h"

/* Private_Hugetlb (kB) of the mapping that starts at p, from /proc/self/smaps;
 * -1 if there is none. */
static long long faulted_kb(const void *p) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[512];
  int inside = 0;
  long long kb = -1;
  while (fgets(line, sizeof(line), f)) {
    uintmax_t start = 0, end = 0;
    if (sscanf(line, "%jx-%jx ", &start, &end) == 2 && strchr(line, ':') > strchr(line, ' ')) {
      if (inside) break;
      inside = start == (uintmax_t)(uintptr_t)p;
    } else if (inside && sscanf(line, "Private_Hugetlb: %lld", &kb) == 1) {
      break;
    }
  }
  fclose(f);
  return kb;
}

int main(int argc, char **argv) {
  size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)2 << 20;
  int count = argc > 2 ? atoi(argv[2]) : 1;
  int untouched = argc > 3 && strcmp(argv[3], "untouched") == 0;
  for (int i = 0; i < count; i++) {
    char *p = hugepool_alloc(bytes);
    if (!p) {
      printf("alloc failed\n");
      return 1;
    }
    if (untouched) printf("faulted_kb %lld\n", faulted_kb(p));
    memset(p, 1, bytes);
    printf("kind %s usable %zu\n", hugepool_kind_name(hugepool_kind_of(p)), hugepool_usable_size(p));
    hugepool_free(p);
  }
  hugepool_stats st;
  hugepool_get_stats(&st);
  printf("policy %s page %zu slots %llu bytes %llu\n", hugepool_policy_name(hugepool_get_policy()),
         hugepool_get_page_size(), (unsigned long long)st.cache_max_slots, (unsigned long long)st.cache_max_bytes);
  fflush(stdout);
  return 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool-probe: a tiny program for the option tests.  It allocates and
 * frees N buffers of SIZE bytes, printing the kind of each, so tests can run
 * it under different HUGEPOOL_* environments.
 *   hugepool-probe [SIZE_BYTES [COUNT]] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hugepool/hugepool.h"

int main(int argc, char **argv) {
  size_t bytes = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)2 << 20;
  int count = argc > 2 ? atoi(argv[2]) : 1;
  for (int i = 0; i < count; i++) {
    char *p = hugepool_alloc(bytes);
    if (!p) {
      printf("alloc failed\n");
      return 1;
    }
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

/* SPDX-License-Identifier: BSD-3-Clause */
/* A program with functions of its own under the generic names the core
 * uses inside (cache_put, registry_find, option_get, ...), linked with the
 * installed libhugepool.a (static-names.sh): it links (no "multiple
 * definition"), each name calls the program's own function, and the library
 * works beside them.  It maps nothing: the pool is left alone. */
#include <hugepool/hugepool.h>
#include <stdio.h>
#include <string.h>

int cache_put(int x);
int registry_find(int x);
const char *option_get(void);
int release_now(int x);
int stats_print(void);
int segment_create(void);
int split_ends(void);
int os_unmap(int x);

int cache_put(int x) { return x + 1; }
int registry_find(int x) { return x * 2; }
const char *option_get(void) { return "the program's own"; }
int release_now(int x) { return x - 1; }
int stats_print(void) { return 4; }
int segment_create(void) { return 5; }
int split_ends(void) { return 6; }
int os_unmap(int x) { return -x; }

static int check(int ok, const char *what) {
  if (!ok) fprintf(stderr, "FAIL: %s\n", what);
  return ok ? 0 : 1;
}

int main(void) {
  int fails = 0, local = 0;
  fails += check(cache_put(1) == 2 && registry_find(3) == 6 && release_now(1) == 0 && stats_print() == 4 &&
                     segment_create() == 5 && split_ends() == 6 && os_unmap(7) == -7,
                 "the program's own functions answer");
  fails += check(strcmp(option_get(), "the program's own") == 0, "option_get is the program's");
  /* The library beside them: its start, its registry, its caches, its statistics. */
  fails += check(hugepool_get_policy() == HUGEPOOL_POLICY_STRICT, "hugepool_get_policy");
  fails += check(!hugepool_owns(&local) && hugepool_usable_size(&local) == 0, "a stack address is not hugepool's");
  hugepool_free(NULL);
  fails += check(hugepool_trim() == 0, "hugepool_trim of an empty cache");
  char text[4096];
  fails += check(hugepool_stats_snprint(text, sizeof(text), HUGEPOOL_STATS_JSON) > 0 && strstr(text, "\"allocs\""),
                 "statistics in JSON");
  if (fails == 0) printf("static-names: the program's names and libhugepool.a's live side by side\n");
  return fails ? 1 : 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool-demo: shows, from the kernel's own view, a buffer landing on
 * hugetlb pages and a freed buffer being reused from the cache.
 *
 * As root it reserves a small pool first if the free pool is short (and
 * gives it back at the end); otherwise it uses what the pool has. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hugepool/hugepool.h"

#define BUF_BYTES ((size_t)64 << 20)
#define PAGES_NEEDED 32
static const char *const kPool = "/proc/sys/vm/nr_hugepages";

static long read_number(const char *path, const char *key) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[256];
  long v = -1;
  size_t klen = key ? strlen(key) : 0;
  while (fgets(line, sizeof(line), f)) {
    if (!key) {
      v = strtol(line, NULL, 10);
      break;
    }
    if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
      v = strtol(line + klen + 1, NULL, 10);
      break;
    }
  }
  (void)fclose(f); /* read-only */
  return v;
}

static int write_number(const char *path, long v) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  int ok = fprintf(f, "%ld\n", v) > 0;
  return (fclose(f) == 0 && ok) ? 0 : -1;
}

/* Prints the smaps fields that prove where `p` lives. */
static void show_smaps(const void *p) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return;
  char line[512];
  int inside = 0;
  while (fgets(line, sizeof(line), f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, ':') > strchr(line, ' ')) {
      inside = (unsigned long)p >= lo && (unsigned long)p < hi;
      if (inside) printf("    mapping %s", line);
      continue;
    }
    if (inside &&
        (!strncmp(line, "KernelPageSize", 14) || !strncmp(line, "Private_Hugetlb", 15) || !strncmp(line, "Size:", 5)))
      printf("    %s", line);
  }
  (void)fclose(f); /* read-only */
}

int main(int argc, char **argv) {
  if (argc > 1 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "--help") == 0)) {
    if (argv[1][2] == 'v')
      printf("hugepool-demo %d.%d.%d\n", HUGEPOOL_VERSION_MAJOR, HUGEPOOL_VERSION_MINOR, HUGEPOOL_VERSION_PATCH);
    else
      printf(
          "usage: hugepool-demo [--version]\n\nMaps a 64 MiB buffer on 2 MB pages and shows from the kernel's "
          "view (smaps)\nwhere it lives, then reuses it from the cache.\n");
    return 0;
  }
  if (argc > 1) {
    (void)fprintf(stderr, "hugepool-demo: unknown argument '%s' (try --help)\n", argv[1]);
    return 2;
  }
  long old_total = read_number(kPool, NULL);
  long free_pages = read_number("/proc/meminfo", "HugePages_Free") - read_number("/proc/meminfo", "HugePages_Rsvd");
  int grew = 0;
  if (free_pages < PAGES_NEEDED && geteuid() == 0) {
    printf("reserving %d more 2 MB pages (pool had %ld free)\n", PAGES_NEEDED, free_pages);
    if (write_number(kPool, old_total + PAGES_NEEDED) == 0) grew = 1;
  }

  printf("1. hugepool_alloc(64 MiB)\n");
  char *buf = hugepool_alloc(BUF_BYTES);
  if (!buf) {
    (void)fprintf(stderr, "hugepool-demo: allocation failed: %s (run as root, or reserve %d pages)\n", strerror(errno),
                  PAGES_NEEDED);
    if (grew) write_number(kPool, old_total);
    return 1;
  }
  memset(buf, 0x5a, BUF_BYTES);
  printf("   buffer at %p, kind %s; the kernel says:\n", (void *)buf, hugepool_kind_name(hugepool_kind_of(buf)));
  show_smaps(buf);

  long free_before = read_number("/proc/meminfo", "HugePages_Free");
  printf("2. hugepool_free + hugepool_alloc of the same size (HugePages_Free before: %ld)\n", free_before);
  hugepool_free(buf);
  char *again = hugepool_alloc(BUF_BYTES);
  long free_after = read_number("/proc/meminfo", "HugePages_Free");
  printf("   got %p (%s mapping), HugePages_Free after: %ld, first byte still 0x%02x\n", (void *)again,
         again == buf ? "the same" : "a new", free_after, again ? (unsigned char)again[0] : 0);

  hugepool_free(again);
  hugepool_trim();
  printf("3. statistics\n");
  hugepool_stats_print(stdout, HUGEPOOL_STATS_TEXT);
  if (grew) write_number(kPool, old_total);
  return again == buf && free_after == free_before ? 0 : 1;
}

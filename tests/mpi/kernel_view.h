/* SPDX-License-Identifier: BSD-3-Clause */
/* The kernel's view for the MPI test programs (C, no test framework): one
 * smaps field of the mapping holding an address, one /proc/meminfo field.
 * tests/kernel_view.hpp is the C++ tests' counterpart. */
#ifndef HUGEPOOL_TESTS_MPI_KERNEL_VIEW_H
#define HUGEPOOL_TESTS_MPI_KERNEL_VIEW_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The field `key` (KernelPageSize, Shared_Hugetlb, ...) of the mapping of
 * /proc/self/smaps that contains addr, in kB; -1 if there is none. */
static inline long smaps_field(const void *addr, const char *key) {
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[512];
  int inside = 0;
  long v = -1;
  size_t k = strlen(key);
  while (f && fgets(line, sizeof(line), f)) {
    unsigned long s, e;
    char c;
    /* a mapping's first line: "start-end perms ..." (its fields have no ':' before the first space) */
    if (sscanf(line, "%lx-%lx %c", &s, &e, &c) == 3 && strchr(line, ':') > strchr(line, ' ')) {
      if (inside) break;
      inside = (unsigned long)addr >= s && (unsigned long)addr < e;
    } else if (inside && strncmp(line, key, k) == 0 && line[k] == ':') {
      v = strtol(line + k + 1, NULL, 10);
    }
  }
  if (f) fclose(f);
  return v;
}

/* The field `key` summed over every mapping of /proc/self/smaps, in kB. */
static inline long smaps_total(const char *key) {
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[512];
  long v = 0;
  size_t k = strlen(key);
  while (f && fgets(line, sizeof(line), f)) {
    if (strncmp(line, key, k) == 0 && line[k] == ':') v += strtol(line + k + 1, NULL, 10);
  }
  if (f) fclose(f);
  return f ? v : -1;
}

/* The /proc/meminfo field `key` (HugePages_Free, ...); -1 if absent. */
static inline long meminfo(const char *key) {
  FILE *f = fopen("/proc/meminfo", "r");
  char line[256];
  long v = -1;
  size_t k = strlen(key);
  while (f && fgets(line, sizeof(line), f)) {
    if (strncmp(line, key, k) == 0 && line[k] == ':') v = strtol(line + k + 1, NULL, 10);
  }
  if (f) fclose(f);
  return v;
}

#endif

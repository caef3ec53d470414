/* SPDX-License-Identifier: BSD-3-Clause */
/* The kernel's view for the Fortran tests: one /proc/self/smaps field of the
 * mapping holding an address, one /proc/meminfo field (tests/mpi/kernel_view.h
 * reads them; this gives them C linkage for bind(C)). */
#include "../../tests/mpi/kernel_view.h"

long hp_test_smaps_kb(const void *addr, const char *key);
long hp_test_meminfo(const char *key);
long hp_test_hugetlb_pages(void);

long hp_test_smaps_kb(const void *addr, const char *key) { return smaps_field(addr, key); }
long hp_test_meminfo(const char *key) { return meminfo(key); }

/* 2 MB pages this process maps (/proc/self/status HugetlbPages): unlike the
 * pool's free count, other processes on the machine do not move it. */
long hp_test_hugetlb_pages(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  while (f && fgets(line, sizeof(line), f)) {
    if (strncmp(line, "HugetlbPages:", 13) == 0) v = strtol(line + 13, NULL, 10) / 2048;
  }
  if (f) fclose(f);
  return v;
}

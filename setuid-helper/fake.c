/* SPDX-License-Identifier: BSD-3-Clause */
/* hugepool-reserve, test build only (HUGEPOOL_RESERVE_TEST_ROOT): plays the
 * kernel's part in the fake tree, and can make the grant table's fsync fail.
 * Linked into hugepool-reserve-fake and nothing else.
 */
#include <errno.h>
#include <unistd.h>

#include "helper.h"

#ifndef HUGEPOOL_RESERVE_TEST_ROOT
#error "fake.c belongs to the test build only"
#endif

/* Free pages follow the pool size, a "capacity" file caps what can be
 * allocated (memory running out), only free pages can go, and a node's
 * pages are pages of the machine-wide pool too. */
int sysfs_pool_write_nr(int node, unsigned size_kb, unsigned long long nr) {
  char path[512], p2[512], g[512];
  unsigned long long old = 0, fr = 0, cap, gnr, gfr;
  if (sysfs_pool_path(path, sizeof path, node, size_kb, "nr_hugepages") != 0 || sysfs_read_ull(path, &old) != 0)
    return -1;
  if (sysfs_pool_path(p2, sizeof p2, node, size_kb, "capacity") == 0 && sysfs_read_ull(p2, &cap) == 0 && nr > cap)
    nr = cap;
  if (sysfs_pool_path(p2, sizeof p2, node, size_kb, "free_hugepages") != 0 || sysfs_read_ull(p2, &fr) != 0) return -1;
  if (nr < old && old - nr > fr) nr = old - fr; /* only free pages can go */
  fr = fr + nr - old;
  if (sysfs_pool_path(p2, sizeof p2, node, size_kb, "free_hugepages") != 0 || sysfs_write_ull(p2, fr) != 0) return -1;
  if (node < 0) { /* the pages a grant on any node gets land on node 0; a shrink takes free ones in node order */
    unsigned long long left = old > nr ? old - nr : nr - old, nnr, nfr, take;
    int n;
    for (n = 0; n <= 1 && left > 0; n++) {
      if (sysfs_pool_path(g, sizeof g, n, size_kb, "nr_hugepages") != 0 || sysfs_read_ull(g, &nnr) != 0 ||
          sysfs_pool_path(p2, sizeof p2, n, size_kb, "free_hugepages") != 0 || sysfs_read_ull(p2, &nfr) != 0)
        continue;
      take = nr > old ? left : (nfr < left ? nfr : left);
      if (nr > old ? sysfs_write_ull(g, nnr + take) != 0 || sysfs_write_ull(p2, nfr + take) != 0
                   : sysfs_write_ull(g, nnr - take) != 0 || sysfs_write_ull(p2, nfr - take) != 0)
        return -1;
      left -= take;
    }
  } else {
    if (sysfs_pool_path(g, sizeof g, -1, size_kb, "nr_hugepages") != 0 || sysfs_read_ull(g, &gnr) != 0 ||
        sysfs_write_ull(g, gnr + nr > old ? gnr + nr - old : 0) != 0 ||
        sysfs_pool_path(g, sizeof g, -1, size_kb, "free_hugepages") != 0 || sysfs_read_ull(g, &gfr) != 0 ||
        sysfs_write_ull(g, gfr + nr > old ? gfr + nr - old : 0) != 0)
      return -1;
  }
  return sysfs_write_ull(path, nr);
}

/* fsync of the grant table.  The test build can be told to fail the
 * (N+1)th call with EIO: a file "fail-fsync" holding N in the fake root. */
int state_table_sync(int fd) {
  static unsigned long long calls;
  unsigned long long fail_at;
  if (sysfs_read_ull(SYS_ROOT "/fail-fsync", &fail_at) == 0 && calls++ == fail_at) {
    errno = EIO;
    return -1;
  }
  return fsync(fd);
}

/* kcmp(KCMP_VM): each process of the fake /proc has its own mm. */
int usage_mm_compare(pid_t a, pid_t b) { return a == b ? 0 : a < b ? 1 : 2; }

/* kcmp(KCMP_FILES): each process of the fake /proc has its own table. */
int usage_files_compare(pid_t a, pid_t b) { return a == b ? 0 : a < b ? 1 : 2; }

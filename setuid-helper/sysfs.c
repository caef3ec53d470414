/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE /* dirfd */
/* hugepool-reserve: what the kernel says.  Reads the pool files, meminfo
 * and /proc/<pid>/status (what processes hold is usage.c's); writes nothing
 * but nr_hugepages.  Rules kept:
 *
 *  1. No symlink is followed: every file is opened with O_NOFOLLOW, every
 *     path built from a validated number and a compile-time prefix (a path
 *     that would not fit is an error, never cut short).
 *  2. Nothing read is trusted: numbers go through reserve_parse_count (no
 *     sign, no leading zero, range-checked), a file larger than its buffer
 *     is an error, a line that does not parse is an error.  A status file
 *     has no size limit: it is read line by line, long lines it does not
 *     need (Groups:) skipped, so no caller can make it unreadable.
 *  3. Fail closed: a count that cannot be made (EMFILE, EACCES, a status
 *     that does not parse) is an error, never zero; only a process that
 *     ended while it was read (ENOENT, ESRCH) is skipped.
 *  4. Per-node pools have no resv_hugepages: the global count is used,
 *     which can only make a check stricter.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "helper.h"

/* ---- small files ---- */

int sysfs_read_fd(int fd, char *buf, size_t cap, size_t *len) {
  size_t n = 0;
  while (n + 1 < cap) {
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    n += (size_t)r;
  }
  if (n + 1 >= cap) { /* larger than we accept */
    errno = EFBIG;
    return -1;
  }
  buf[n] = '\0';
  *len = n;
  return 0;
}

int sysfs_read_small(const char *path, char *buf, size_t cap, size_t *len) {
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  int rc;
  if (fd < 0) return -1;
  rc = sysfs_read_fd(fd, buf, cap, len);
  close(fd);
  return rc;
}

int sysfs_read_ull(const char *path, unsigned long long *v) {
  char buf[32];
  size_t len;
  if (sysfs_read_small(path, buf, sizeof buf, &len) != 0) return -1;
  if (len > 0 && buf[len - 1] == '\n') buf[--len] = '\0';
  return reserve_parse_count(buf, 1ULL << 50, v);
}

int sysfs_write_ull(const char *path, unsigned long long v) {
  char buf[32];
  int n = snprintf(buf, sizeof buf, "%llu\n", v);
  int fd = open(path, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  ssize_t w;
  if (fd < 0) return -1;
  w = write(fd, buf, (size_t)n);
  if (close(fd) != 0) w = -1;
  return w == n ? 0 : -1;
}

/* ---- pools ---- */

/* Pool paths are built only from a validated node number and page size and
 * a compile-time prefix; a path that would not fit is an error, not cut. */
int sysfs_pool_path(char *buf, size_t cap, int node, unsigned size_kb, const char *what) {
  int n;
  if (node < 0)
    n = snprintf(buf, cap, SYS_ROOT "/sys/kernel/mm/hugepages/hugepages-%ukB/%s", size_kb, what);
  else
    n = snprintf(buf, cap, SYS_ROOT "/sys/devices/system/node/node%d/hugepages/hugepages-%ukB/%s", node, size_kb, what);
  return n > 0 && (size_t)n < cap ? 0 : -1;
}

int sysfs_pool_file_read(int node, unsigned size_kb, const char *what, unsigned long long *v) {
  char path[512];
  if (sysfs_pool_path(path, sizeof path, node, size_kb, what) != 0) return -1;
  return sysfs_read_ull(path, v);
}

/* Per-node directories have no resv_hugepages: use the global count, which
 * can only overstate what is reserved on the node (the safe direction). */
int sysfs_pool_read(int node, unsigned size_kb, struct pool_state *st) {
  if (sysfs_pool_file_read(node, size_kb, "nr_hugepages", &st->nr) != 0 ||
      sysfs_pool_file_read(node, size_kb, "free_hugepages", &st->free) != 0 ||
      sysfs_pool_file_read(node, size_kb, "surplus_hugepages", &st->surplus) != 0 ||
      sysfs_pool_file_read(-1, size_kb, "resv_hugepages", &st->resv) != 0)
    return -1;
  return 0;
}

/* Free pages nobody has reserved: the most the pool may shrink by. */
unsigned long long sysfs_pool_spare(const struct pool_state *st) {
  return st->free > st->resv ? st->free - st->resv : 0;
}

#ifndef HUGEPOOL_RESERVE_TEST_ROOT /* the test build's fake kernel (fake.c) plays this part */
int sysfs_pool_write_nr(int node, unsigned size_kb, unsigned long long nr) {
  char path[512];
  if (sysfs_pool_path(path, sizeof path, node, size_kb, "nr_hugepages") != 0) return -1;
  return sysfs_write_ull(path, nr);
}
#endif

/* The NUMA nodes of the machine (nodeN directories), in order. */
size_t sysfs_node_list(int *nodes, size_t cap) {
  DIR *d = opendir(SYS_ROOT "/sys/devices/system/node");
  struct dirent *e;
  size_t n = 0, i;
  if (d == NULL) return 0;
  while ((e = readdir(d)) != NULL && n < cap) {
    unsigned long long v;
    if (strncmp(e->d_name, "node", 4) != 0 || reserve_parse_count(e->d_name + 4, RESERVE_MAX_NODE, &v) != 0) continue;
    for (i = n; i > 0 && nodes[i - 1] > (int)v; i--) nodes[i] = nodes[i - 1];
    nodes[i] = (int)v;
    n++;
  }
  closedir(d);
  return n;
}

/* ---- meminfo ---- */

static int meminfo_field(const char *text, const char *key, unsigned long long *v) {
  const char *p = strstr(text, key);
  char num[24];
  size_t n = 0;
  if (p == NULL || (p != text && p[-1] != '\n')) return -1;
  p += strlen(key);
  while (*p == ' ') p++;
  while (*p >= '0' && *p <= '9' && n + 1 < sizeof num) num[n++] = *p++;
  num[n] = '\0';
  if (strncmp(p, " kB\n", 4) != 0) return -1;
  return reserve_parse_count(num, 1ULL << 50, v);
}

int sysfs_meminfo_read(struct meminfo *m) {
  char buf[8192];
  size_t len;
  if (sysfs_read_small(SYS_ROOT "/proc/meminfo", buf, sizeof buf, &len) != 0) return -1;
  if (meminfo_field(buf, "MemTotal:", &m->total_kb) != 0 || meminfo_field(buf, "MemAvailable:", &m->avail_kb) != 0 ||
      meminfo_field(buf, "Hugetlb:", &m->hugetlb_kb) != 0)
    return -1;
  return 0;
}

/* A NUMA node's own memory: "Node N MemTotal:" and "Node N MemFree:" of
 * /sys/devices/system/node/nodeN/meminfo (a node has no MemAvailable), and
 * its hugetlb memory from its pools of every page size. */
int sysfs_node_meminfo_read(int node, struct meminfo *m) {
  char path[512], buf[8192], key[48];
  size_t len;
  unsigned long long nr;
  static const unsigned sizes[] = {RESERVE_PAGE_2M, RESERVE_PAGE_1G};
  size_t i;
  if (snprintf(path, sizeof path, SYS_ROOT "/sys/devices/system/node/node%d/meminfo", node) >= (int)sizeof path ||
      sysfs_read_small(path, buf, sizeof buf, &len) != 0)
    return -1;
  snprintf(key, sizeof key, "Node %d MemTotal:", node);
  if (meminfo_field(buf, key, &m->total_kb) != 0) return -1;
  snprintf(key, sizeof key, "Node %d MemFree:", node);
  if (meminfo_field(buf, key, &m->avail_kb) != 0) return -1;
  m->hugetlb_kb = 0;
  for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    if (sysfs_pool_file_read(node, sizes[i], "nr_hugepages", &nr) == 0) m->hugetlb_kb += nr * sizes[i];
  return 0;
}

/* ---- /proc/<pid>/status ---- */

static int status_number(const char **p, unsigned long long max, unsigned long long *v) {
  char num[24];
  size_t n = 0;
  while (**p == ' ' || **p == '\t') (*p)++;
  while (**p >= '0' && **p <= '9' && n + 1 < sizeof num) num[n++] = *(*p)++;
  num[n] = '\0';
  return reserve_parse_count(num, max, v);
}

/* One whole line of a status file; the keys looked for, and what they fill. */
static int status_take(const char *line, struct proc_status *ps) {
  const char *p = line + 4;
  if (strncmp(line, "Uid:", 4) == 0 || strncmp(line, "Gid:", 4) == 0) {
    int uid = line[0] == 'U';
    if (status_number(&p, 0xffffffffULL, uid ? &ps->ruid : &ps->rgid) != 0 ||
        status_number(&p, 0xffffffffULL, uid ? &ps->euid : &ps->egid) != 0)
      return -1;
    ps->have |= uid ? 1 : 2;
  } else if (strncmp(line, "HugetlbPages:", 13) == 0) {
    p = line + 13;
    if (status_number(&p, 1ULL << 50, &ps->hugetlb_kb) != 0) return -1;
  }
  return 0;
}

/* Reads the file line by line through a small line buffer, however long it
 * is: a line that does not fit (Groups: of a caller with thousands of
 * groups) is skipped to its end, unless it is one of the lines we need
 * (those are short; a long one is an error).  Only a file that ends while
 * it is read in the middle of nothing is whole. */
int sysfs_proc_status_read(int fd, struct proc_status *ps) {
  char chunk[512], line[128] = {0}; /* zeroed: a short line never reads past its end */
  size_t n = 0, i;
  int over = 0;
  memset(ps, 0, sizeof *ps);
  for (;;) {
    ssize_t r = read(fd, chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    for (i = 0; i < (size_t)r; i++) {
      if (chunk[i] != '\n') {
        if (n + 1 < sizeof line)
          line[n++] = chunk[i];
        else
          over = 1; /* the first bytes stay in line: its key */
        continue;
      }
      line[n] = '\0';
      if (over ? strncmp(line, "Uid:", 4) == 0 || strncmp(line, "Gid:", 4) == 0 ||
                     strncmp(line, "HugetlbPages:", 13) == 0
               : status_take(line, ps) != 0)
        goto bad;
      n = 0;
      over = 0;
    }
  }
  if (n != 0 || ps->have != 3) goto bad; /* cut short, or no Uid:/Gid: line */
  return 0;
bad:
  errno = EPROTO;
  return -1;
}

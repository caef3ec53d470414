/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE /* dirfd */
/* hugepool-reserve: the hugetlb memfds a caller's processes hold open, for
 * a release (usage.c counts the rest).  Rules kept:
 *
 *  1. Counted over, never under: the blocks of every hugetlb memfd, each
 *     file once (past USAGE_MAX_FILES a file may count twice); a process
 *     whose descriptors cannot be read adds nothing (those pages are no
 *     other user's: usage.c's rule 1 keeps what was promised to them).
 *  2. Nothing the caller controls can block us or be opened: fd is opened
 *     O_NOFOLLOW below /proc/<pid>; a descriptor is looked at only if its
 *     link names a memfd, and then with statx(AT_STATX_DONT_SYNC) (no file
 *     system is asked: a FUSE daemon cannot stall a release that holds the
 *     lock), and counted only if it is on the kernel's own hugetlbfs (the
 *     device of a memfd we make).
 *  3. A descriptor table shared by several processes (CLONE_FILES; kcmp
 *     KCMP_FILES) is read once: the same files, the same count.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "helper.h"

#ifndef MFD_HUGE_2MB /* <linux/memfd.h>, whose other macros clash with glibc's */
#define MFD_HUGE_2MB (21U << 26)
#define MFD_HUGE_1GB (30U << 26)
#endif

#ifndef HUGEPOOL_RESERVE_TEST_ROOT /* the test build's fake kernel (fake.c) plays this part */
int usage_files_compare(pid_t a, pid_t b) { return (int)syscall(SYS_kcmp, a, b, KCMP_FILES, 0UL, 0UL); }
#endif

void usage_files_init(struct usage_files *f) {
  static const unsigned flags[] = {MFD_HUGETLB, MFD_HUGETLB | MFD_HUGE_2MB, MFD_HUGETLB | MFD_HUGE_1GB};
  size_t i;
  memset(f, 0, sizeof *f);
  for (i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    struct stat st;
    int fd = memfd_create("hugepool-reserve", MFD_CLOEXEC | flags[i]); /* empty: it holds no page */
    if (fd >= 0 && fstat(fd, &st) == 0) f->memfd_dev[f->nmemfd_devs++] = st.st_dev;
    if (fd >= 0) close(fd);
  }
}

static int file_seen(struct usage_files *f, const struct statx *st) {
  unsigned long long dev = (unsigned long long)makedev(st->stx_dev_major, st->stx_dev_minor);
  size_t i;
  int hugetlb = 0;
  for (i = 0; i < f->nmemfd_devs; i++) hugetlb |= f->memfd_dev[i] == dev;
  if (!hugetlb) return 1; /* not a page of the pool */
  for (i = 0; i < f->nfiles; i++)
    if (f->file_dev[i] == dev && f->file_ino[i] == st->stx_ino) return 1;
  if (f->nfiles < USAGE_MAX_FILES) {
    f->file_dev[f->nfiles] = dev;
    f->file_ino[f->nfiles++] = st->stx_ino;
  }
  return 0;
}

/* 1 if pid's descriptor table is one read before (rule 3), else 0 and it
 * is remembered.  One that cannot be compared is read (over, never under). */
static int table_seen(struct usage_files *f, pid_t pid) {
  size_t i;
  for (i = 0; i < f->ntables; i++)
    if (usage_files_compare(f->table_pid[i], pid) == 0) return 1;
  if (f->ntables < USAGE_MAX_TABLES) f->table_pid[f->ntables++] = pid;
  return 0;
}

unsigned long long usage_files_kb(struct usage_files *f, pid_t pid) {
  static const char memfd[] = "/memfd:";
  char path[sizeof SYS_ROOT + 40], link[sizeof memfd - 1];
  unsigned long long kb = 0;
  struct dirent *e;
  DIR *d;
  int dfd;
  if (table_seen(f, pid)) return 0;
  snprintf(path, sizeof path, SYS_ROOT "/proc/%ld/fd", (long)pid);
  if ((dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 || (d = fdopendir(dfd)) == NULL) {
    if (dfd >= 0) close(dfd);
    return 0;
  }
  while ((e = readdir(d)) != NULL) {
    struct statx st;
    if (e->d_name[0] == '.' || readlinkat(dirfd(d), e->d_name, link, sizeof link) != (ssize_t)sizeof link ||
        memcmp(link, memfd, sizeof link) != 0 ||
        statx(dirfd(d), e->d_name, AT_STATX_DONT_SYNC, STATX_TYPE | STATX_INO | STATX_BLOCKS, &st) != 0 ||
        !S_ISREG(st.stx_mode) || file_seen(f, &st))
      continue;
    kb += st.stx_blocks / 2; /* 512-byte blocks */
  }
  closedir(d);
  return kb;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* The OS layer, continued: the kernel's part of splitting a 2 MB hugetlb
 * page of a live buffer into 4 KB pages (split.c keeps the rules and the
 * table of split pages; its rules 2 and 3 are carried out here).  Same
 * contract as os.c (os.h).
 *
 * The page's copy goes into a fresh anonymous 2 MB mapping (read through
 * /proc/self/mem when the page is not readable; not at all when it was never
 * touched), which then replaces the hugetlb page with one mremap.  From
 * before the copy until after the mremap the hugetlb page is write-protected
 * through a userfaultfd of its own (UFFDIO_WRITEPROTECT): a write by another
 * thread waits in the kernel, and UFFDIO_WAKE after the mremap sends it to
 * retry on the 4 KB pages.  Unprivileged, the descriptor is
 * UFFD_USER_MODE_ONLY.  Without any userfaultfd a page is copied unprotected
 * only where no other thread can write to it; otherwise ENOMEM (reported
 * once).  The calling thread blocks its signals meanwhile. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "os-kernel.h"

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef UFFD_FEATURE_WP_HUGETLBFS_SHMEM
#define UFFD_FEATURE_WP_HUGETLBFS_SHMEM (1 << 12)
#endif

static atomic_bool warned_refused;
static atomic_bool uffd_user_only; /* a full userfaultfd was refused (EPERM): not asked again */

static int copy_unreadable(void *dst, uintptr_t src) {
  int fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < HP_2M) {
    ssize_t n = pread(fd, (char *)dst + done, HP_2M - done, (off_t)(src + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      close(fd);
      errno = err;
      return -1;
    }
    done += (size_t)n;
  }
  close(fd);
  return 0;
}

/* [page, page + 2 MB) write-protected; returns the descriptor to hand to
 * write_release, or -1 with errno. */
static int write_protect(char *page) {
#ifdef SYS_userfaultfd
  int fd = -1;
  if (!atomic_load_explicit(&uffd_user_only, memory_order_relaxed)) {
    fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 && errno == EPERM) atomic_store_explicit(&uffd_user_only, true, memory_order_relaxed);
  }
  if (fd < 0) fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
  if (fd < 0) return -1;
  struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_WP_HUGETLBFS_SHMEM};
  struct uffdio_register reg = {.range = {.start = (uintptr_t)page, .len = HP_2M}, .mode = UFFDIO_REGISTER_MODE_WP};
  struct uffdio_writeprotect wp = {.range = {.start = (uintptr_t)page, .len = HP_2M},
                                   .mode = UFFDIO_WRITEPROTECT_MODE_WP};
  if (ioctl(fd, UFFDIO_API, &api) == 0 && ioctl(fd, UFFDIO_REGISTER, &reg) == 0 &&
      ioctl(fd, UFFDIO_WRITEPROTECT, &wp) == 0)
    return fd;
  int err = errno;
  close(fd); /* unregisters the range, if it got that far */
  errno = err;
  return -1;
#else
  (void)page;
  errno = ENOSYS;
  return -1;
#endif
}

/* Wakes the writers that wait; they retry where the page now is: on the
 * 4 KB pages, or (a failed split) on the hugetlb page, unprotected and
 * unregistered again.  Explicitly, not by the close alone: a child forked
 * meanwhile holds the descriptor too, and the close would release nothing
 * (the writers would wait for that child to exit or exec). */
static void write_release(int fd, char *page, bool split_done) {
  if (fd < 0) return;
  struct uffdio_range range = {.start = (uintptr_t)page, .len = HP_2M};
  if (split_done) {
    (void)ioctl(fd, UFFDIO_WAKE, &range);
  } else {
    struct uffdio_writeprotect un = {.range = range, .mode = 0};
    (void)ioctl(fd, UFFDIO_WRITEPROTECT, &un);
    (void)ioctl(fd, UFFDIO_UNREGISTER, &range);
  }
  close(fd);
}

/* Is the caller the process's only thread (from /proc/self/status)? */
static bool only_thread(void) {
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  size_t have = 0;
  for (;;) {
    ssize_t r = read(fd, buf + have, sizeof(buf) - 1 - have);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    have += (size_t)r;
    if (have == sizeof(buf) - 1) break;
  }
  close(fd);
  buf[have] = '\0';
  const char *t = strstr(buf, "\nThreads:");
  return t && strtol(t + 9, NULL, 10) == 1;
}

static void warn_refused(const char *page, int err) {
  if (atomic_exchange(&warned_refused, true)) return;
  os_report(
      "cannot move the 2 MB page at %p to 4 KB pages without risking other threads' writes: no userfaultfd "
      "write protection here (%s); the mprotect/madvise call fails with ENOMEM (printed once)",
      (const void *)page, strerror(err));
}

/* The copy of the page, once protected: a missing page reads as zero. */
static int copy_page(char *anon, char *page, int prot) {
  unsigned char present = 0; /* looked at once protected: a first write now waits too */
  if (mincore(page, 4096, &present) != 0 || !(present & 1)) return 0;
  if (prot & PROT_READ) {
    memcpy(anon, page, HP_2M);
    return 0;
  }
  return copy_unreadable(anon, (uintptr_t)page);
}

int os_split_huge_page(void *addr, bool others_may_write) {
  char *page = addr;
  int prot = os_prot_at((uintptr_t)page);
  if (prot < 0) return -1;
  char *anon = sys_mmap(NULL, HP_2M, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (anon == MAP_FAILED) return -1;
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = 0, fd = others_may_write ? write_protect(page) : -1;
  int why = errno;
  if (fd < 0 && others_may_write && (prot & PROT_WRITE) && !only_thread()) {
    warn_refused(page, why);
    errno = ENOMEM;
    rc = -1;
  }
  if (rc == 0) rc = copy_page(anon, page, prot);
  if (rc == 0 && prot != (PROT_READ | PROT_WRITE)) rc = sys_mprotect(anon, HP_2M, prot);
  /* libc: seen by registration hooks (the page's frames change). */
  if (rc == 0 && mremap(anon, HP_2M, HP_2M, MREMAP_MAYMOVE | MREMAP_FIXED, page) == MAP_FAILED) rc = -1;
  int err = errno;
  write_release(fd, page, rc == 0);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    (void)sys_munmap(anon, HP_2M);
    errno = err;
    return -1;
  }
  return 0;
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* mprotect, pkey_mprotect and madvise on malloc'd memory behave as under
 * glibc.  The kernel refuses 4 KB granularity on hugetlb pages: mprotect of
 * one page inside a hugepool buffer is EINVAL, so is MADV_DONTNEED at an
 * address that is not 2 MB aligned, and MADV_DONTNEED of 4 KB at a 2 MB
 * boundary returns 0 and zeroes nothing (the kernel rounds the end down).
 * Here such a call splits the 2 MB pages it cuts into 4 KB pages with the
 * same contents (lib/split.c), then runs as the program made it.
 *
 * The cost stays off the common path: mprotect and every other advice go to
 * the kernel first and are looked at only when it answers EINVAL; only
 * MADV_DONTNEED from a 2 MB boundary to an end that is not one is looked at
 * before (a registry look-up).  Advice that is a hint (THP, read-ahead,
 * MADV_FREE, KSM, dump) on hugepool's pages is answered 0 as the kernel
 * would answer it for anonymous memory, and nothing is split for it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hooks.h" /* split.c's 4 KB granularity */
#include "preload.h"

#define HPL_EXPORT __attribute__((visibility("default")))

#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

/* glibc's functions (found once; the system call until then): an MPI
 * library's memory hooks may have patched them to see madvise calls. */
static int (*libc_mprotect)(void *, size_t, int);
static int (*libc_madvise)(void *, size_t, int);

__attribute__((constructor(101))) static void protect_constructor(void) {
  void *m = hp_dlsym(RTLD_NEXT, "mprotect");
  void *a = hp_dlsym(RTLD_NEXT, "madvise");
  memcpy(&libc_mprotect, &m, sizeof(m)); /* an object pointer as a function pointer */
  memcpy(&libc_madvise, &a, sizeof(a));
}

static int do_mprotect(void *addr, size_t len, int prot) {
  return libc_mprotect ? libc_mprotect(addr, len, prot) : os_mprotect(addr, len, prot);
}

static int do_madvise(void *addr, size_t len, int advice) {
  return libc_madvise ? libc_madvise(addr, len, advice) : os_madvise(addr, len, advice);
}

static int do_pkey_mprotect(void *addr, size_t len, int prot, int pkey) {
  return os_pkey_mprotect(addr, len, prot, pkey);
}

static bool page_aligned(const void *addr) { return ((uintptr_t)addr & 4095) == 0; }

/* After the kernel's EINVAL for a valid range: split the pages it cuts;
 * true if the call is worth making again. */
static bool split_for_retry(void *addr, size_t len) {
  if (!page_aligned(addr) || len == 0) return false; /* glibc's answer too */
  if (!hpl_serving()) return false; /* passive or not started: no hugepool memory here */
  int saved = errno;
  int rc = split_ends(addr, len);
  if (rc == 0) errno = saved; /* not hugepool's memory: the kernel's answer stands */
  return rc > 0;
}

HPL_EXPORT int mprotect(void *addr, size_t len, int prot) {
  int rc = do_mprotect(addr, len, prot);
  if (HPL_LIKELY(rc == 0) || errno != EINVAL || !split_for_retry(addr, len)) return rc;
  return do_mprotect(addr, len, prot);
}

HPL_EXPORT int pkey_mprotect(void *addr, size_t len, int prot, int pkey) {
  int rc = do_pkey_mprotect(addr, len, prot, pkey);
  if (HPL_LIKELY(rc == 0) || errno != EINVAL || !split_for_retry(addr, len)) return rc;
  return do_pkey_mprotect(addr, len, prot, pkey);
}

static bool zeroes(int advice) { return advice == MADV_DONTNEED || advice == MADV_DONTNEED_LOCKED; }

/* Advice that changes nothing a program can read back; on hugetlb pages the
 * kernel refuses or ignores it, and so may it on anonymous memory. */
static bool hint(int advice) {
  switch (advice) {
    case MADV_NORMAL:
    case MADV_RANDOM:
    case MADV_SEQUENTIAL:
    case MADV_WILLNEED:
    case MADV_FREE:
    case MADV_HUGEPAGE:
    case MADV_NOHUGEPAGE:
    case MADV_COLLAPSE:
    case MADV_MERGEABLE:
    case MADV_UNMERGEABLE:
    case MADV_DONTDUMP:
    case MADV_DODUMP:
    case MADV_COLD:
    case MADV_PAGEOUT:
      return true;
    default:
      return false;
  }
}

HPL_EXPORT int madvise(void *addr, size_t len, int advice) {
  uintptr_t a = (uintptr_t)addr, end = a + len;
  /* From a 2 MB boundary to an end that is not one, the kernel zeroes whole
   * huge pages only and still answers 0: split the last page first. */
  if (zeroes(advice) && len && page_aligned(addr) && (a & (HPL_2M - 1)) == 0 && (end & (HPL_2M - 1)) != 0 &&
      hpl_serving() && split_touches(addr, len)) {
    if (split_ends(addr, len) < 0) return -1;
  }
  int rc = do_madvise(addr, len, advice);
  if (HPL_LIKELY(rc == 0) || errno != EINVAL || !page_aligned(addr) || len == 0) return rc;
  if (hint(advice)) {
    int saved = errno;
    if (hpl_serving() && split_touches(addr, len)) return 0;
    errno = saved; /* not hugepool's memory: the kernel's answer stands */
    return rc;
  }
  if (!split_for_retry(addr, len)) return rc;
  return do_madvise(addr, len, advice);
}

/* SPDX-License-Identifier: BSD-3-Clause */
/* The OS layer's memory calls: every mapping hugepool makes or gives back
 * (hugetlb, anonymous fallback, metadata, reserved address space), NUMA
 * binding, population, and the reporter the layer speaks through.  The
 * layer's other files: os-pool.c (the kernel's pool counts), os-io.c
 * (small files, stderr, the statistics file, the fork pipe), os-move.c
 * (moving a buffer, or onto 4 KB pages), os-file.c (node-shared segments'
 * files); os-kernel.h is what they share.  The contract of every function is stated once, in
 * os.h.  Nothing here calls malloc, so the preload interposer can use it
 * from inside malloc, and nothing here calls above this layer: what it
 * must say goes through the reporter (os_report()). */
#define _GNU_SOURCE
#include "os.h"

#include <errno.h>
#include <linux/mempolicy.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "os-kernel.h"

static _Atomic(os_reporter) reporter;

void os_set_reporter(os_reporter report) { atomic_store(&reporter, report); }

/* One line for the user, through the core's reporter (none yet: nothing). */
void os_report(const char *fmt, ...) {
  os_reporter to = atomic_load(&reporter);
  if (!to) return;
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (n >= 0) to(line);
}

void *os_map_huge(size_t size, size_t page_size) {
  /* No MAP_NORESERVE: the kernel reserves every page now, so a shortage is
   * an ENOMEM here and never a SIGBUS at first touch. */
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB;
  flags |= page_size == HP_1G ? MAP_HUGE_1GB : MAP_HUGE_2MB;
  void *p = sys_mmap(NULL, size, PROT_READ | PROT_WRITE, flags, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* Anonymous memory of `size` bytes aligned to `align`: over-map by `align`
 * and trim both ends.  NULL with errno on failure. */
static char *map_aligned(size_t size, size_t align, int prot, int flags) {
  size_t span = size + align;
  if (span < size) {
    errno = ENOMEM;
    return NULL;
  }
  char *raw = sys_mmap(NULL, span, prot, flags, -1, 0);
  if (raw == MAP_FAILED) return NULL;
  char *start = raw + ((align - (uintptr_t)raw % align) % align);
  size_t head = (size_t)(start - raw);
  size_t tail = span - head - size;
  if (head) (void)sys_munmap(raw, head);
  if (tail) (void)sys_munmap(start + size, tail);
  return start;
}

void *os_map_anon(size_t size, size_t align, bool want_thp) {
  /* Over-map and trim so the fallback is aligned like a huge page: THP can
   * then back every 2 MB of it, and all hugepool buffers share one alignment. */
  char *start = map_aligned(size, align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS);
  if (start == NULL) return NULL;
  /* MADV_NOHUGEPAGE makes the 4 KB fallback honest on THP=always systems. */
  (void)sys_madvise(start, size, want_thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  return start;
}

void os_unmap(void *addr, size_t size) {
  /* libc: seen by registration hooks.  Always libc's munmap (never a raw
   * syscall): MPI registration caches (UCX, libfabric) hook it to learn
   * that the range is gone.  Every block
   * the core gives back comes here through release_now() (release.c). */
  if (munmap(addr, size) != 0) {
    os_report("munmap(%p, %zu) failed: %s", addr, size, strerror(errno));
  }
}

int os_bind_node(void *addr, size_t size, int node) {
  unsigned long mask[16];
  const unsigned long bits = sizeof(mask) * 8;
  if (node < 0 || (unsigned long)node >= bits) {
    errno = EINVAL;
    return -1;
  }
  memset(mask, 0, sizeof(mask));
  mask[(unsigned)node / (8 * sizeof(unsigned long))] |= 1UL << ((unsigned)node % (8 * sizeof(unsigned long)));
  /* The system call itself, not libnuma's wrapper of it: libnuma's
   * constructor reads /proc and /sys in every process that loads it, which
   * cost each preloaded exec a third of a millisecond (bench/RESULTS.md
   * section 33).  maxnode counts one past the last bit, as mbind(2) reads it. */
  return (int)syscall(SYS_mbind, (long)addr, (long)size, (long)MPOL_BIND, (long)mask, (long)(bits + 1),
                      (long)MPOL_MF_STRICT);
}

int os_madvise(void *addr, size_t len, int advice) { return sys_madvise(addr, len, advice); }

int os_mprotect(void *addr, size_t len, int prot) { return sys_mprotect(addr, len, prot); }

int os_pkey_mprotect(void *addr, size_t len, int prot, int pkey) {
#ifdef SYS_pkey_mprotect
  return (int)syscall(SYS_pkey_mprotect, (long)addr, (long)len, (long)prot, (long)pkey);
#else
  (void)addr, (void)len, (void)prot, (void)pkey;
  errno = ENOSYS;
  return -1;
#endif
}

int os_populate(void *addr, size_t size) {
  /* Faults every page in now and reports a shortage as an error (EFAULT /
   * ENOMEM) instead of delivering SIGBUS at the first touch. */
  return sys_madvise(addr, size, MADV_POPULATE_WRITE);
}

void *os_map_meta(size_t size) {
  void *p = sys_mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

void *os_map_sparse(size_t size) {
  /* MAP_NORESERVE: only the pages touched count against the commit limit. */
  void *p = sys_mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

void os_unmap_meta(void *addr, size_t size) { (void)sys_munmap(addr, size); }

/* ---- address space for growth in place (realloc.c) ---------------------- */

void *os_reserve(size_t size, size_t align) {
  /* PROT_NONE and MAP_NORESERVE: no memory, no commit charge, no pool page;
   * only the range.  Over-map and trim for the alignment, as above. */
  return map_aligned(size, align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE);
}

int os_unmap_to_reserve(void *addr, size_t size) {
  /* One call replaces the mapping: the range is never free for another
   * thread's mmap to land in.  libc: seen by registration hooks (the
   * buffer's pages go). */
  void *p = mmap(addr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return p == MAP_FAILED ? -1 : 0;
}

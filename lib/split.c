/* SPDX-License-Identifier: BSD-3-Clause */
/* 2 MB pages of live buffers turned into 4 KB pages, so that a program can
 * mprotect or madvise its malloc'd memory at 4 KB granularity, as it can
 * under glibc (guard pages of interpreters, GCs and JITs; MADV_DONTNEED of
 * a few pages).  The kernel refuses both on hugetlb memory (EINVAL), or, for
 * MADV_DONTNEED from a 2 MB boundary, rounds the end down and zeroes
 * nothing.
 *
 * Rules this file keeps:
 * 1. Only the 2 MB pages a call cuts are split (its first and its last, when
 *    not 2 MB aligned), only in live buffers of 2 MB hugetlb pages; whole
 *    pages stay hugetlb and the kernel handles them.
 * 2. A split page keeps its address, contents and protection: a fresh
 *    anonymous 2 MB mapping gets a copy (read through /proc/self/mem when
 *    the page is not readable; not at all when it was never touched) and
 *    replaces the hugetlb page with one mremap, which gives that page and
 *    its reservation back to the pool.
 * 3. No write is lost to the copy.  From before the copy until after the
 *    mremap the hugetlb page is write-protected through a userfaultfd of its
 *    own (UFFDIO_WRITEPROTECT; on private hugetlb memory since Linux 5.19,
 *    a page never touched included): a write by another thread waits in the
 *    kernel, and UFFDIO_WAKE after the mremap sends it to retry on the 4 KB
 *    pages.  Nothing the program can see changes: no signal handler or
 *    disposition, no thread stopped, the descriptor closed before the call
 *    returns (a child forked in the window inherits it, close-on-exec).
 *    Unprivileged (vm.unprivileged_userfaultfd = 0, the default) the
 *    descriptor is UFFD_USER_MODE_ONLY: a system call writing into the page
 *    during the copy fails with EFAULT instead of waiting (an error the
 *    program sees, never a lost write).  Without any userfaultfd (seccomp,
 *    an older kernel, a range the program registered with its own), a page
 *    is copied unprotected only where no other thread can write to it (not
 *    writable, or the only thread of the process); otherwise the split, and
 *    so the call, fails with ENOMEM (warned once).  The splitting thread
 *    blocks its signals meanwhile: a handler writing to the page on this
 *    thread would wait for itself, or write into the copy's past.
 *    Set aside: making the page read-only and retrying faulting writes from
 *    a SIGSEGV handler.  The kernel looks the action up when it delivers the
 *    signal, so a fault taken in the window but delivered after the
 *    handler's removal kills the program; keeping the handler for good means
 *    interposing sigaction for every program (JVMs, Go, sanitizers check or
 *    chain theirs) and still missing raw rt_sigaction calls.
 * 4. The split pages are remembered here, by address: a block that has some
 *    is unmapped when freed, never cached (the caches hand out blocks as
 *    all hugetlb); a resize carries them along; a forked child copies the
 *    rest of such a block page by page.  Counted, and warned about once.
 * 5. One mutex serialises splits and the table; it is taken before any
 *    registry or thread-cache lock, never after (fork's child uses the table
 *    alone, with a fresh mutex).
 * 6. The kernel's part of rules 2 and 3 (the maps, the copy, the
 *    userfaultfd, mprotect and mremap) is the OS layer's (os-split.c), whose
 *    calls reach the kernel past the preload's own mprotect and madvise. */
#define _GNU_SOURCE
#include "split.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "hooks.h"
#include "live.h"
#include "registrar.h"
#include "registry.h"

static pthread_mutex_t split_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t *split_pages; /* split_lock; unsorted, a handful in practice */
static size_t n_split, cap_split;
static atomic_size_t n_split_now; /* read without the lock: 0 = nothing to look at */
static _Atomic uint64_t n_split_total;
static atomic_bool warned;

static bool is_split(uintptr_t page) {
  for (size_t i = 0; i < n_split; i++)
    if (split_pages[i] == page) return true;
  return false;
}

static int remember(uintptr_t page) {
  if (n_split == cap_split) {
    size_t cap = cap_split ? cap_split * 2 : 512;
    uintptr_t *grown = os_map_meta(cap * sizeof(*grown));
    if (!grown) return -1;
    if (n_split) memcpy(grown, split_pages, n_split * sizeof(*grown));
    if (split_pages) os_unmap_meta(split_pages, cap_split * sizeof(*grown));
    split_pages = grown;
    cap_split = cap;
  }
  split_pages[n_split++] = page;
  atomic_store(&n_split_now, n_split);
  return 0;
}

/* Drops the split pages in [lo, hi); with keep, moves those that fall in
 * [new_lo, new_hi) once shifted there.  Returns how many were in [lo, hi). */
static size_t forget_range(uintptr_t lo, uintptr_t hi, bool keep, uintptr_t new_lo, uintptr_t new_hi) {
  size_t hits = 0;
  for (size_t i = 0; i < n_split;) {
    uintptr_t p = split_pages[i];
    if (p >= lo && p < hi) {
      hits++;
      uintptr_t moved = new_lo + (p - lo);
      if (keep && moved < new_hi) {
        split_pages[i++] = moved;
        continue;
      }
      split_pages[i] = split_pages[--n_split];
      continue;
    }
    i++;
  }
  atomic_store(&n_split_now, n_split);
  return hits;
}

/* The live block holding addr: registry entries are keyed by their start,
 * a 2 MB boundary, so look back one 2 MB step at a time, no further than
 * the bytes hugepool maps. */
static bool block_at(const void *addr, hp_block *out) { return registry_find_holding(addr, registry_find, out); }

static void warn_once(const char *page, const hp_block *b) {
  if (atomic_exchange(&warned, true)) return;
  hp_warn(
      "a call at 4 KB granularity (mprotect or madvise) inside the %zu MiB buffer at %p: its 2 MB page at %p "
      "moved to 4 KB pages, as can others later (each is counted in the statistics; this line is printed "
      "once)",
      b->size >> 20, b->addr, (const void *)page);
}

/* The kernel's part (os-split.c), counted. */
static int move_page_to_small(char *page, bool others_may_write) {
  if (os_split_huge_page(page, others_may_write) != 0) return -1;
  atomic_fetch_add_explicit(&n_split_total, 1, memory_order_relaxed);
  if (hp_trace_on())
    hp_trace(HP_TRACE_SPLIT, "the 2 MB page at %p moved to 4 KB pages: the program asked for mprotect or madvise "
             "inside it", (void *)page);
  return 0;
}

/* One cut page; split_lock held. */
static int split_page_at(char *addr, bool *ours) {
  hp_block b;
  if (!block_at(addr, &b) || b.kind != HUGEPOOL_KIND_HUGE_2M) return 0;
  *ours = true;
  char *page = addr - ((uintptr_t)addr & (HP_2M - 1));
  if (is_split((uintptr_t)page)) return 0;
  hp_block live; /* the block stays put meanwhile: a resize or free of it waits its turn */
  if (live_begin_resize(b.addr, &live) != 0) {
    *ours = false; /* cached, not live: the program's call meets the kernel's answer */
    return 0;
  }
  int rc = 0;
  if (remember((uintptr_t)page) != 0) {
    rc = -1;
  } else if (move_page_to_small(page, true) != 0) {
    int err = errno;
    (void)forget_range((uintptr_t)page, (uintptr_t)page + 1, false, 0, 0);
    errno = err;
    rc = -1;
  } else {
    warn_once(page, &live);
  }
  int err = errno;
  live_end_in_place(&live);
  errno = err;
  return rc;
}

static void unregister_block_at(const void *addr) {
  hp_block b;
  if (block_at(addr, &b) && b.kind == HUGEPOOL_KIND_HUGE_2M) registrar_release(b.addr, b.size);
}

bool split_touches(const void *addr, size_t len) {
  hp_block b;
  const char *last = (const char *)addr + (len ? len - 1 : 0);
  if (block_at(addr, &b) && b.kind == HUGEPOOL_KIND_HUGE_2M) return true;
  return ((uintptr_t)last >> 21) != ((uintptr_t)addr >> 21) && block_at(last, &b) && b.kind == HUGEPOOL_KIND_HUGE_2M;
}

int split_ends(void *addr, size_t len) {
  uintptr_t a = (uintptr_t)addr;
  size_t span = (len + 4095) & ~(size_t)4095;
  uintptr_t end = a + span;
  if (len == 0 || span < len || end < a) return 0;
  bool ours = false;
  int rc = 0;
  /* A page that moves to 4 KB pages leaves a registration pinning the old
   * one: it goes first, before split_lock (a registrar's callback may call
   * back into mprotect or madvise). */
  if (a & (HP_2M - 1)) unregister_block_at(addr);
  if (end & (HP_2M - 1)) unregister_block_at((char *)addr + span - 1);
  pthread_mutex_lock(&split_lock);
  if (a & (HP_2M - 1)) rc = split_page_at(addr, &ours);
  if (rc == 0 && (end & (HP_2M - 1))) rc = split_page_at((char *)addr + span - 1, &ours);
  int err = errno;
  pthread_mutex_unlock(&split_lock);
  errno = err;
  return rc < 0 ? -1 : ours ? 1 : 0;
}

bool split_release(const void *addr, size_t size) {
  if (atomic_load_explicit(&n_split_now, memory_order_relaxed) == 0) return false;
  pthread_mutex_lock(&split_lock);
  size_t hits = forget_range((uintptr_t)addr, (uintptr_t)addr + size, false, 0, 0);
  pthread_mutex_unlock(&split_lock);
  return hits > 0;
}

void split_resized(const void *from, size_t old_size, const void *to, size_t new_size) {
  if (atomic_load_explicit(&n_split_now, memory_order_relaxed) == 0) return;
  if (from == to && new_size >= old_size) return;
  pthread_mutex_lock(&split_lock);
  (void)forget_range((uintptr_t)from, (uintptr_t)from + old_size, true, (uintptr_t)to, (uintptr_t)to + new_size);
  pthread_mutex_unlock(&split_lock);
}

bool split_fork_privatize(hp_block *b) {
  if (atomic_load_explicit(&n_split_now, memory_order_relaxed) == 0 || b->kind != HUGEPOOL_KIND_HUGE_2M) return false;
  /* The only thread of the child: a lock held by a parent thread that is
   * gone would never be released. */
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  memcpy(&split_lock, &fresh, sizeof(fresh));
  uintptr_t lo = (uintptr_t)b->addr, hi = lo + b->size;
  bool any = false;
  for (size_t i = 0; i < n_split && !any; i++) any = split_pages[i] >= lo && split_pages[i] < hi;
  if (!any) return false;
  for (char *page = b->addr; page < (char *)b->addr + b->size; page += HP_2M) {
    if (is_split((uintptr_t)page) || os_populate(page, HP_2M) == 0) continue; /* 4 KB pages: copy-on-write */
    if (move_page_to_small(page, false) != 0 || remember((uintptr_t)page) != 0)
      hp_warn("fork: cannot copy the 2 MB page at %p inherited from the parent (%s); writing to it may SIGBUS",
              (void *)page, strerror(errno));
  }
  return true;
}

uint64_t split_count(void) { return atomic_load_explicit(&n_split_total, memory_order_relaxed); }

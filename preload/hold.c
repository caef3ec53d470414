/* SPDX-License-Identifier: BSD-3-Clause */
/* HUGEPOOL_HOLD: how much of the node's pool a new large request may hold
 * (hugepool-run(1), "Pool pages held"; preload/README.md).
 *
 * A private hugetlb mapping reserves all its pages when it is made, touched
 * or not.  Under `share` a new request of more than HP_HOLD_FLOOR bytes that
 * is also more than 1/HP_HOLD_DIVISOR of the node's pool (nr_hugepages plus
 * nr_overcommit_hugepages) goes to glibc, so that a buffer a program sizes
 * from its input and the machine's memory, and mostly never touches (GNU
 * sort), holds none of the pool.  A request of one page is never held back
 * (with 1 GB pages: a 1 GB request).  Growth of a hugepool buffer (realloc)
 * is not measured: a program grows what it fills.  `auto` is `all` in an
 * MPI rank, with HUGEPOOL_CUDA and with the strict policy, where the
 * guarantee is the point; `share` otherwise.
 *
 * The pool's size is read from sysfs at most once a second (a coarse
 * clock), so a request served from the cache makes no system call. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <time.h>

#include "hooks.h"
#include "preload.h"

#define POOL_REREAD_NS 1000000000LL

static bool hold_share;
static _Atomic long pool_pages = -1;
static _Atomic long long pool_read_ns; /* 0: never read */
static struct {
  _Alignas(64) _Atomic uint64_t n;
  _Atomic uint64_t bytes;
} held_back;

void hpl_hold_init(bool strict) {
  long long hold = option_get(HP_OPT_HOLD);
  if (hold == HP_HOLD_AUTO)
    hold = hp_mpi_rank() || option_get(HP_OPT_CUDA) != HP_CUDA_OFF || strict ? HP_HOLD_ALL : HP_HOLD_SHARE;
  hold_share = hold == HP_HOLD_SHARE;
}

/* The pool's pages, read again when the last read is a second old. */
static long pool_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  long long now = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec + 1;
  long long at = atomic_load_explicit(&pool_read_ns, memory_order_acquire);
  if (at != 0 && now - at < POOL_REREAD_NS) return atomic_load_explicit(&pool_pages, memory_order_relaxed);
  long pages = hp_pool_pages();
  atomic_store_explicit(&pool_pages, pages, memory_order_relaxed);
  atomic_store_explicit(&pool_read_ns, now, memory_order_release);
  return pages;
}

bool hpl_beyond_share(size_t size, bool count) {
  if (HPL_LIKELY(!hold_share || size <= HP_HOLD_FLOOR)) return false;
  size_t page = hugepool_get_page_size();
  size_t pages = size / page + (size % page != 0);
  long pool = pool_now();
  if (pages <= 1 || pool < 0 || pages <= (size_t)pool / HP_HOLD_DIVISOR) return false; /* unreadable pool: all */
  if (!count) return true;
  if (hp_trace_on())
    hp_trace(HP_TRACE_HOLD, "%zu bytes to glibc malloc: %zu pages are more than an eighth of the pool's %ld "
             "(HUGEPOOL_HOLD=share; =all reserves it whole)", size, pages, pool);
  atomic_fetch_add_explicit(&held_back.n, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&held_back.bytes, size, memory_order_relaxed);
  return true;
}

void hpl_hold_counts(uint64_t *n, uint64_t *bytes) {
  *n = atomic_load_explicit(&held_back.n, memory_order_relaxed);
  *bytes = atomic_load_explicit(&held_back.bytes, memory_order_relaxed);
}

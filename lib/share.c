/* SPDX-License-Identifier: BSD-3-Clause */
/* The pool is the node's, not this process's.
 *
 * Every rank of a job on a node draws on one pool.  A rank that keeps freed
 * pages cached while another rank of the same job is short makes the other
 * fall back to 4 KB pages (or fail): a cache limit that ignores the other
 * ranks - 1 GiB each, 64 GiB for 64 ranks - is wrong for every job sized to
 * its working set.  So:
 *
 *  1. A rank's share of a pool is pool pages / ranks on the node, the rank
 *     count read once from the launcher (MPICH/Hydra MPI_LOCALNRANKS, Open
 *     MPI OMPI_COMM_WORLD_LOCAL_SIZE, PMIx PMIX_LOCAL_SIZE, Slurm
 *     SLURM_NTASKS_PER_NODE: launcher.c's table; 1 when none is set or the
 *     value is garbage).
 *  2. A freed block is cached only while the rank maps (live + cached) no
 *     more than its share; past it the block goes back to the pool.  That
 *     check is two relaxed loads on the free path.
 *  3. Before mapping more (the slow path anyway), a rank over its share gives
 *     back its oldest cached blocks first, so live + cached never exceeds
 *     max(share, live): when every rank's live set fits its share, the ranks
 *     together never hold more than the pool.
 *  4. The pool size is re-read on that slow path at most once a millisecond
 *     (one sysfs read): a pool resized during the job is followed.
 *  5. Whatever launched it, a process gives its cached pages back when the
 *     node's free pool runs low: on the same slow paths (a miss that maps, a
 *     free that the thread cache cannot take), at most once every
 *     PRESSURE_MS, it reads the pool (nr_hugepages, free_hugepages,
 *     resv_hugepages: three small sysfs reads).  Low means fewer free pages
 *     than 1/16 of the free ones and those this process maps together (at
 *     least one) while other processes hold pages of the pool (pool - free -
 *     what this process maps > 0); then every cached block of that page
 *     size goes back, from every thread's cache.  (Measured against what
 *     this process could give back, not against the whole pool: pages a
 *     long-running program elsewhere holds for good must not stop it from
 *     caching.)  Cached
 *     pages are in no one's use, and another process of the node may be about
 *     to need them.  A process alone on its pool keeps its cache: a shortage
 *     there is its own, and the ENOMEM retry gives back just what it needs.
 * A single process (one rank) keeps the plain limits: its share is the
 * whole pool. */
#define _GNU_SOURCE
#include "share.h"

#include <stdatomic.h>
#include <stdint.h>

#include "launcher.h"
#include "os.h"

static long ranks = 1;
static _Atomic size_t pool_bytes[2] = {SIZE_MAX, SIZE_MAX}; /* [0] 2 MB, [1] 1 GB pages */
static _Atomic long long mapped[2];
static _Atomic long long refreshed_ms[2];
static _Atomic long long pressure_ms[2];

#define PRESSURE_MS 5

static int index_of(size_t page_size) { return page_size == HP_1G; }

void share_init(void) {
  long n = launcher_local_ranks();
  if (n) ranks = n;
}

long share_local_ranks(void) { return ranks; }

void share_refresh(size_t page_size) {
  if (ranks == 1) return;
  int i = index_of(page_size);
  long long now = os_coarse_ms();
  if (atomic_load_explicit(&refreshed_ms[i], memory_order_relaxed) == now) return;
  atomic_store_explicit(&refreshed_ms[i], now, memory_order_relaxed);
  long total = os_pool_total(page_size, -1);
  atomic_store_explicit(&pool_bytes[i], total < 0 ? SIZE_MAX : (size_t)total * page_size, memory_order_relaxed);
}

void share_mapped(size_t page_size, long long delta) {
  atomic_fetch_add_explicit(&mapped[index_of(page_size)], delta, memory_order_relaxed);
}

static size_t share_of(int i) {
  size_t pool = atomic_load_explicit(&pool_bytes[i], memory_order_relaxed);
  return pool == SIZE_MAX ? SIZE_MAX : pool / (size_t)ranks;
}

bool share_may_cache(size_t page_size) {
  if (ranks == 1) return true;
  int i = index_of(page_size);
  long long m = atomic_load_explicit(&mapped[i], memory_order_relaxed);
  return m <= 0 || (size_t)m <= share_of(i);
}

size_t share_excess(size_t page_size, size_t size) {
  if (ranks == 1) return 0;
  int i = index_of(page_size);
  long long m = atomic_load_explicit(&mapped[i], memory_order_relaxed);
  size_t want = (m > 0 ? (size_t)m : 0) + size, share = share_of(i);
  return want > share ? want - share : 0;
}

bool share_pool_low(size_t page_size) {
  int i = index_of(page_size);
  long long now = os_coarse_ms(), last = atomic_load_explicit(&pressure_ms[i], memory_order_relaxed);
  if (now - last < PRESSURE_MS && now >= last) return false;
  atomic_store_explicit(&pressure_ms[i], now, memory_order_relaxed);
  long total = os_pool_total(page_size, -1), avail = os_pool_available(page_size, -1);
  if (total <= 0 || avail < 0) return false;
  long long own = atomic_load_explicit(&mapped[i], memory_order_relaxed) / (long long)page_size;
  if (own < 0) own = 0;
  long long low = (avail + own) / 16 > 1 ? (avail + own) / 16 : 1;
  return avail < low && (long long)total - avail - own > 0;
}

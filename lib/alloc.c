/* SPDX-License-Identifier: BSD-3-Clause */
/* Allocation and free: the thread's cache first, then the shared cache and
 * the other threads' caches, then a new mapping (reclaiming cached pages
 * when the pool is short), then the policy's fallback. */
#define _GNU_SOURCE
#include "alloc.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "cache.h"
#include "hooks.h"
#include "live.h"
#include "registrar.h"
#include "registry.h"
#include "share.h"
#include "split.h"
#include "tcache.h"

/* Bytes chosen for release but not yet unmapped (lazy release runs outside
 * the lock): an ENOMEM retry waits for them to reach the pool. */
static atomic_size_t releasing;

static size_t page_of(hugepool_kind kind) {
  return kind == HUGEPOOL_KIND_HUGE_1G ? HP_1G : kind == HUGEPOOL_KIND_HUGE_2M ? HP_2M : 0;
}

/* An empty pool, detected once and re-checked with backoff.
 *
 * A request the pool cannot cover costs a failed mmap and two sysfs reads
 * (25-35 us); a program that keeps asking (the preload's fallback serves
 * it from glibc, which reuses its own memory in ~0.1 us) ran 1.3-1.6x
 * slower than plain (sqlite3, make -j2 with an empty pool).  So after such
 * a failure, requests for any node of that size or larger fail at once
 * until a deadline, 1 ms after the first failure, doubling up to
 * SHORT_MAX_MS while the pool stays short; one real attempt at each
 * deadline.  Smaller requests still try: what the pool has may fit them.  Pages this process
 * unmaps end the wait (they are back in the pool); pages that other
 * processes free or that are reserved meanwhile are seen at the next
 * deadline.  Cached blocks still serve the requests they fit (the caches
 * come first); what waits is the eviction of cached blocks of other sizes
 * to make room.  Only where a refusal has somewhere else to go (a fallback
 * policy, or the preload's glibc: hp_short_backoff): a strict caller is
 * refused only by the pool itself. */
#define SHORT_MIN_MS 1
#define SHORT_MAX_MS 64

static _Atomic long long short_until_ns[2]; /* [0] 2 MB, [1] 1 GB pages; 0: not short */
static _Atomic long long short_wait_ns[2];
static _Atomic size_t short_size[2]; /* the smallest request refused in this wait */

static long long mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts); /* vDSO: no system call */
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

bool hp_short_backoff;

static bool pool_known_short(size_t size, size_t page) {
  if (!hp_short_backoff && hp_current_policy() == HUGEPOOL_POLICY_STRICT) return false;
  int i = page == HP_1G;
  long long until = atomic_load_explicit(&short_until_ns[i], memory_order_relaxed);
  return until != 0 && size >= atomic_load_explicit(&short_size[i], memory_order_relaxed) && mono_ns() < until;
}

static void pool_found_short(size_t size, size_t page) {
  int i = page == HP_1G;
  size_t was = atomic_load_explicit(&short_size[i], memory_order_relaxed);
  bool waiting = atomic_load_explicit(&short_until_ns[i], memory_order_relaxed) != 0;
  atomic_store_explicit(&short_size[i], waiting && was < size ? was : size, memory_order_relaxed);
  long long wait = atomic_load_explicit(&short_wait_ns[i], memory_order_relaxed);
  wait = wait == 0                             ? SHORT_MIN_MS * 1000000LL
         : wait * 2 > SHORT_MAX_MS * 1000000LL ? SHORT_MAX_MS * 1000000LL
                                               : wait * 2;
  atomic_store_explicit(&short_wait_ns[i], wait, memory_order_relaxed);
  atomic_store_explicit(&short_until_ns[i], mono_ns() + wait, memory_order_relaxed);
}

/* Pages of this size may be back: the next request tries the pool.  A load
 * first: frees call this, and the line is written only when it changes. */
static void pool_maybe_back(size_t page) {
  int i = page == HP_1G;
  if (atomic_load_explicit(&short_until_ns[i], memory_order_relaxed) == 0 &&
      atomic_load_explicit(&short_wait_ns[i], memory_order_relaxed) == 0)
    return;
  atomic_store_explicit(&short_until_ns[i], 0, memory_order_relaxed);
  atomic_store_explicit(&short_wait_ns[i], 0, memory_order_relaxed);
}

void release_mark(const hp_block *blocks, size_t n) {
  size_t bytes = 0;
  for (size_t i = 0; i < n; i++) bytes += blocks[i].size;
  atomic_fetch_add(&releasing, bytes);
}

void release_now(hp_block *blocks, size_t n) {
  if (n == 0) return;
  size_t bytes = 0;
  for (size_t i = 0; i < n; i++) {
    registrar_release(blocks[i].addr, blocks[i].size); /* registered while cached: dropped with the mapping */
    os_unmap(blocks[i].addr, blocks[i].size);
    bytes += blocks[i].size;
    size_t page = page_of((hugepool_kind)blocks[i].kind);
    if (page) share_mapped(page, -(long long)blocks[i].size);
    if (page) pool_maybe_back(page);
  }
  atomic_fetch_sub(&releasing, bytes);
  pthread_mutex_lock(&hp_lock);
  for (size_t i = 0; i < n; i++) stats_unmapped(blocks[i].size);
  pthread_mutex_unlock(&hp_lock);
}

void release_forget_in_flight(void) { atomic_store(&releasing, 0); }

size_t release_batches(size_t (*take)(hp_block *out, size_t max, void *arg), void *arg, uint64_t *counter) {
  size_t total = 0;
  hp_block batch[HP_BATCH];
  for (;;) {
    pthread_mutex_lock(&hp_lock);
    size_t n = take(batch, HP_BATCH, arg);
    if (counter) *counter += n;
    release_mark(batch, n);
    pthread_mutex_unlock(&hp_lock);
    if (n == 0) return total;
    for (size_t i = 0; i < n; i++) total += batch[i].size;
    release_now(batch, n);
  }
}

/* Registers a block as live and counts it; the caller holds hp_lock. */
static int make_live(hp_block *b, size_t requested, bool hit) {
  b->requested = requested;
  if (registry_insert(b) != 0) return -1;
  hp_stats.allocs++;
  if (hit)
    hp_stats.cache_hits++;
  else
    hp_stats.cache_misses++;
  hp_stats.live_buffers++;
  hp_stats.bytes_live += b->size;
  hp_stats.bytes_requested += requested;
  hp_stats.bytes_slack += b->size - requested;
  if (b->kind == HUGEPOOL_KIND_THP) hp_stats.fallbacks_thp++;
  if (b->kind == HUGEPOOL_KIND_SMALL) hp_stats.fallbacks_small++;
  return 0;
}

/* A cached block of this shape: this thread's cache without any shared
 * lock, else the shared cache or another thread's; NULL on a miss. */
static void *take_cached(size_t requested, size_t size, int node, hugepool_kind kind) {
  hp_block b;
  hp_tcache *tc = tcache_self();
  void *p;
  size_t max_size = hp_fit_max(size, kind == HUGEPOOL_KIND_HUGE_1G ? HP_1G : HP_2M);
  if (tc && tcache_take(tc, size, max_size, requested, node, kind, &p)) return p; /* registered already */
  pthread_mutex_lock(&hp_lock);
  if (!cache_take(size, max_size, node, kind, &b) && !tcache_steal(size, node, kind, &b)) {
    pthread_mutex_unlock(&hp_lock);
    return NULL;
  }
  if (make_live(&b, requested, true) == 0) {
    pthread_mutex_unlock(&hp_lock);
    return b.addr;
  }
  release_mark(&b, 1);
  pthread_mutex_unlock(&hp_lock);
  release_now(&b, 1);
  errno = ENOMEM;
  return NULL;
}

typedef struct reclaim {
  hugepool_kind kind;
  size_t need;
} reclaim;

/* Oldest blocks of one kind, from the shared cache then the threads'. */
static size_t take_of_kind(hp_block *out, size_t max, void *arg) {
  reclaim *r = arg;
  size_t n = 0;
  while (n < max && r->need > 0 && cache_evict_kind(r->kind, &out[n])) {
    r->need = r->need > out[n].size ? r->need - out[n].size : 0;
    n++;
  }
  if (n < max && r->need > 0) n += tcache_drain(r->kind, out + n, max - n, &r->need);
  return n;
}

/* Every cached block, the shared cache's then the threads'. */
static size_t take_any(hp_block *out, size_t max, void *arg) {
  (void)arg;
  size_t n = cache_drain(out, max);
  return n + tcache_drain(HUGEPOOL_KIND_NONE, out + n, max - n, NULL);
}

size_t release_cached(void) { return release_batches(take_any, NULL, &hp_stats.trims); }

size_t release_for(hugepool_kind kind, size_t need) {
  reclaim r = {kind, need};
  return need ? release_batches(take_of_kind, &r, &hp_stats.cache_evictions) : 0;
}

/* Maps fresh hugetlb memory; with a node, binds and populates it there so a
 * shortage on that node is an error now, not a SIGBUS later. */
static void *map_huge(size_t size, size_t page, int node) {
  void *p = os_map_huge(size, page);
  if (!p || node == HUGEPOOL_ANY_NODE) return p;
  if (os_bind_node(p, size, node) != 0 || os_populate(p, size) != 0) {
    int err = errno;
    os_unmap(p, size);
    errno = (err == EFAULT || err == ENOMEM) ? ENOMEM : err;
    return NULL;
  }
  return p;
}

static void *map_fallback(size_t size, int node, bool thp) {
  void *p = os_map_anon(size, HP_2M, thp);
  if (p && node != HUGEPOOL_ANY_NODE && os_bind_node(p, size, node) != 0) {
    int err = errno;
    os_unmap(p, size);
    errno = err;
    return NULL;
  }
  return p;
}

/* Maps a new hugetlb block.  Gives back first what this process caches
 * beyond its share of the node's pool, or all it caches of this page size
 * when the node's free pool is low (share.c).  On ENOMEM, if the pages
 * the cache holds (and releases in flight) could make up the shortfall,
 * evicts just enough of them, waits for other threads' lazy releases, and
 * tries once more. */
static void *map_huge_trying(size_t size, size_t page, int node, hugepool_kind kind);

static void *map_huge_reclaiming(size_t size, size_t page, int node, hugepool_kind kind) {
  if (node == HUGEPOOL_ANY_NODE && pool_known_short(size, page)) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = map_huge_trying(size, page, node, kind);
  if (p) {
    pool_maybe_back(page);
  } else if (errno == ENOMEM && node == HUGEPOOL_ANY_NODE) {
    pool_found_short(size, page);
    errno = ENOMEM;
  }
  return p;
}

static void *map_huge_trying(size_t size, size_t page, int node, hugepool_kind kind) {
  share_refresh(page);
  release_for(kind, share_pool_low(page) ? SIZE_MAX : share_excess(page, size));
  void *p = map_huge(size, page, node);
  if (p || errno != ENOMEM) return p;
  pthread_mutex_lock(&hp_lock);
  size_t cached = cache_bytes_of_kind(kind) + tcache_bytes_of_kind(kind);
  pthread_mutex_unlock(&hp_lock);
  size_t in_flight = atomic_load(&releasing);
  long avail = os_pool_available(page, node);
  size_t have = avail > 0 ? (size_t)avail * page : 0;
  if (cached + in_flight + have < size) {
    errno = ENOMEM; /* hopeless: keep the cache */
    return NULL;
  }
  size_t shortfall = size > have + in_flight ? size - have - in_flight : 0;
  release_for(kind, shortfall);
  while (atomic_load(&releasing) > 0) sched_yield(); /* other threads' lazy releases */
  p = map_huge(size, page, node);
  if (!p) errno = ENOMEM;
  return p;
}

void release_wait(void) {
  while (atomic_load(&releasing) > 0) sched_yield();
}

/* Maps a new block of `kind` and registers it. */
static void *map_new(size_t requested, size_t size, int node, hugepool_kind kind, bool *fresh) {
  size_t page = page_of(kind);
  void *p = page ? map_huge_reclaiming(size, page, node, kind) : map_fallback(size, node, kind == HUGEPOOL_KIND_THP);
  if (!p) return NULL;
  if (page) share_mapped(page, (long long)size);
  hp_block b = {.addr = p, .size = size, .node = node, .kind = kind};
  pthread_mutex_lock(&hp_lock);
  stats_mapped(size);
  int rc = make_live(&b, requested, false);
  if (rc != 0) release_mark(&b, 1);
  pthread_mutex_unlock(&hp_lock);
  if (rc != 0) {
    release_now(&b, 1);
    errno = ENOMEM;
    return NULL;
  }
  *fresh = true;
  return p;
}

static void count_failure(void) {
  pthread_mutex_lock(&hp_lock);
  if (!hp_short_backoff) hp_stats.failures++; /* else served elsewhere: counted there as a fallback */
  pthread_mutex_unlock(&hp_lock);
  errno = ENOMEM;
}

static size_t round_up(size_t bytes, size_t unit) {
  size_t r = (bytes + unit - 1) & ~(unit - 1);
  return r < bytes ? 0 : r;
}

void *hp_allocate(size_t bytes, int node, bool *fresh) {
  *fresh = false;
  if (bytes == 0 || node < HUGEPOOL_ANY_NODE) {
    errno = EINVAL;
    return NULL;
  }
  if (node != HUGEPOOL_ANY_NODE && !os_node_has_memory(node)) {
    hp_warn("NUMA node %d does not exist or has no memory (see /sys/devices/system/node/has_memory)", node);
    errno = EINVAL;
    return NULL;
  }
  size_t page = hp_current_page_size();
  size_t size = round_up(bytes, page);
  if (size == 0) {
    errno = ENOMEM;
    return NULL;
  }
  hugepool_kind kind = page == HP_1G ? HUGEPOOL_KIND_HUGE_1G : HUGEPOOL_KIND_HUGE_2M;
  void *p = take_cached(bytes, size, node, kind);
  if (p) return p;
  p = map_new(bytes, size, node, kind, fresh);
  if (p || errno != ENOMEM) return p;

  hugepool_policy policy = hp_current_policy();
  if (policy == HUGEPOOL_POLICY_STRICT) {
    hp_report_shortage(size, page, node);
    count_failure();
    return NULL;
  }
  hugepool_kind fallback = policy == HUGEPOOL_POLICY_THP ? HUGEPOOL_KIND_THP : HUGEPOOL_KIND_SMALL;
  size_t fallback_size = round_up(bytes, HP_2M);
  p = take_cached(bytes, fallback_size, node, fallback);
  if (!p) p = map_new(bytes, fallback_size, node, fallback, fresh);
  if (!p) count_failure();
  return p;
}

static void release_one(hp_block *b) {
  pthread_mutex_lock(&hp_lock);
  release_mark(b, 1);
  pthread_mutex_unlock(&hp_lock);
  release_now(b, 1);
}

/* Takes the live block at ptr out of the registry (or out of the thread
 * cache that handed it out): 0, EINVAL (not live) or EBUSY (resizing). */
static int remove_live(const void *ptr, hp_block *b) {
  for (;;) {
    int err = registry_remove_idle(ptr, b);
    if (err != EAGAIN) return err;
    hp_block copy = *b; /* a thread cache's: ask it */
    err = tcache_detach(&copy, false, b);
    if (err != EAGAIN) return err;
  }
}

bool alloc_free(void *ptr, bool keep, bool quiet) {
  if (!ptr) return false;
  int saved = errno;
  hp_block b, victims[HP_BATCH];
  hp_tcache *tc = tcache_self();
  /* The fast path: a block this thread's cache handed out goes back to it;
   * neither the registry nor any shared lock is touched. */
  int own = tc && keep ? tcache_free_own(tc, ptr, &b) : 0;
  if (own) {
    if (own == 2) release_one(&b); /* over this process's share of the pool */
    errno = saved;
    return true;
  }
  int busy = remove_live(ptr, &b);
  if (busy == EINVAL && quiet) {
    errno = saved;
    return false;
  }
  if (busy) {
    hp_warn("hugepool_free(%p): %s; ignored", ptr,
            busy == EBUSY ? "another thread is resizing this buffer" : "not a live hugepool buffer");
    errno = saved;
    return busy == EBUSY;
  }
  size_t headroom = b.headroom; /* address space realloc.c kept for growth */
  b.headroom = 0;               /* cached blocks (shared or thread caches) have none */
  size_t page = page_of((hugepool_kind)b.kind);
  /* A block with pages split to 4 KB (split.c) is unmapped: caches hand out all-hugetlb blocks. */
  bool may_cache = !split_release(b.addr, b.size) && keep && (!page || share_may_cache(page));
  if (tc && tcache_put_fast(tc, &b, may_cache)) {
    if (headroom) os_unmap((char *)b.addr + b.size, headroom);
    errno = saved;
    return true;
  }
  if (page && may_cache && share_pool_low(page)) { /* the node needs its pages back */
    may_cache = false;
    release_for((hugepool_kind)b.kind, SIZE_MAX);
  }
  size_t n_victims = 0;
  pthread_mutex_lock(&hp_lock);
  if (!tc) { /* no thread cache: count here */
    hp_stats.frees++;
    hp_stats.live_buffers--;
    hp_stats.bytes_live -= b.size;
    hp_stats.bytes_requested -= b.requested;
    hp_stats.bytes_slack -= b.size - b.requested;
  }
  bool cached = false;
  if (may_cache) {
    cached = tc && tcache_put_slow(tc, &b, victims, HP_BATCH, &n_victims);
    if (!cached) {
      hp_stats.cache_evictions += n_victims;
      release_mark(victims, n_victims);
      pthread_mutex_unlock(&hp_lock);
      release_now(victims, n_victims);
      n_victims = 0;
      pthread_mutex_lock(&hp_lock);
      cached = cache_put(&b, victims, HP_BATCH, &n_victims);
      hp_stats.cache_evictions += cached ? n_victims : n_victims - 1;
    } else {
      hp_stats.cache_evictions += n_victims;
    }
  } else {
    victims[n_victims++] = b;
  }
  release_mark(victims, n_victims);
  pthread_mutex_unlock(&hp_lock);
  release_now(victims, n_victims); /* lazy release: outside the lock */
  if (headroom) os_unmap((char *)b.addr + b.size, headroom);
  errno = saved;
  return true;
}

/* ---- live blocks, for realloc.c ---------------------------------------- */

void live_end_resize(const hp_block *was, const hp_block *now, hp_resize_outcome outcome) {
  hp_block b = *now, old;
  b.resizing = 0;
  if (b.addr == was->addr) {
    live_end_in_place(&b);
  } else {
    (void)registry_remove_resized(was->addr, &old);
    if (registry_insert(&b) != 0) /* the new address's stripe could not grow */
      hp_warn("hugepool_realloc(%p): no memory to track the moved buffer %p; it is no longer a hugepool buffer",
              was->addr, b.addr);
  }
  split_resized(was->addr, was->size, b.addr, b.size); /* its 4 KB pages, if any, follow */
  size_t page = page_of((hugepool_kind)b.kind);
  if (page && b.size != was->size) share_mapped(page, (long long)b.size - (long long)was->size);
  pthread_mutex_lock(&hp_lock);
  if (b.size > was->size) stats_mapped(b.size - was->size);
  if (b.size < was->size) stats_unmapped(was->size - b.size);
  /* Deltas: the thread caches hold part of these counters (tcache_sum_stats). */
  hp_stats.bytes_live += b.size - was->size;
  hp_stats.bytes_requested += b.requested - was->requested;
  hp_stats.bytes_slack += (b.size - b.requested) - (was->size - was->requested);
  if (outcome == HP_RESIZE_GROWN) hp_stats.realloc_grows++;
  if (outcome == HP_RESIZE_SHRUNK) hp_stats.realloc_shrinks++;
  if (outcome == HP_RESIZE_FAILED && !hp_short_backoff) hp_stats.failures++;
  pthread_mutex_unlock(&hp_lock);
}

void live_reclaim(uint32_t kind, size_t bytes) {
  release_for((hugepool_kind)kind, bytes); /* the shared cache, then the threads' */
  release_wait();                          /* other threads' lazy releases */
}

void live_count_copy(void) {
  pthread_mutex_lock(&hp_lock);
  hp_stats.realloc_copies++;
  pthread_mutex_unlock(&hp_lock);
}

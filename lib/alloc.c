/* SPDX-License-Identifier: BSD-3-Clause */
/* Allocation and free: the thread's cache first, then the shared cache and
 * the other threads' caches, then a new mapping (reclaiming cached pages
 * when the pool is short), then the policy's fallback. */
#define _GNU_SOURCE
#include "alloc.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>

#include "cache.h"
#include "embed.h"
#include "hooks.h"
#include "live.h"
#include "registrar.h"
#include "registry.h"
#include "release.h"
#include "share.h"
#include "shortage.h"
#include "split.h"
#include "tcache.h"

/* Registers a block as live and counts it; the caller holds hp_lock. */
static int make_live(hp_block *b, size_t requested, bool hit) {
  b->requested = requested;
  if (registry_insert(b) != 0) return -1;
  base_stats_birth(&hp_stats, b);
  if (hit)
    hp_stats.cache_hits++;
  else
    hp_stats.cache_misses++;
  return 0;
}

/* HUGEPOOL_CACHE_DECAY: a cached block nobody took for decay_ms goes back
 * to the pool at the next slow path (a new mapping, a free its thread's
 * cache cannot keep), so a program that freed a buffer it will not ask for
 * again holds no pool page for it.  A hot loop that reuses its buffers runs
 * no slow path and loses nothing.  The cost, with a decay set: a coarse
 * clock read (4 ns) at each free, and on slow paths a look at every cache
 * at most once a clock tick (4 ms). */
static _Atomic long long decay_ms;
static _Atomic long long decay_looked_ms;

void alloc_set_decay(long long ms) {
  atomic_store_explicit(&decay_ms, ms > 0 ? ms : 0, memory_order_relaxed);
  tcache_set_stamping(ms > 0);
}

void alloc_give_back_idle(void) {
  long long decay = atomic_load_explicit(&decay_ms, memory_order_relaxed);
  if (!decay) return;
  long long now = os_coarse_ms(), last = atomic_load_explicit(&decay_looked_ms, memory_order_relaxed);
  if (last == now || !atomic_compare_exchange_strong_explicit(&decay_looked_ms, &last, now, memory_order_relaxed,
                                                              memory_order_relaxed))
    return; /* looked at in this clock tick, or another thread looks now */
  size_t bytes = release_idle(now, decay);
  if (bytes && hp_trace_on())
    hp_trace(HP_TRACE_IDLE, "%zu bytes of cached buffers unused for %lld ms or more given back to the pool", bytes,
             decay);
}

/* A miss, served by the blocks this process freed last rather than by a
 * new mapping: the thread's last freed block (t) and the shared cache's
 * newest (c).  Why: their pages were written last, so the CPU's caches may
 * still hold their lines, where a new mapping gets the pages on top of the
 * kernel's free list (given back earlier, when this process keeps its last
 * freed ones cached) and a cached block of the very size may have lain
 * unused for long.  hpcc's MPIFFT asks for 1 and 1.5 MiB right after its
 * STREAM test freed three 4 MiB blocks: mapped anew, its first pass over
 * them took 161 us against 103 plain and 89 on STREAM's pages
 * (bench/RESULTS.md section 29).  In turn:
 *  - t and c joined, when they are adjacent (the two parts of a split
 *    block, say) and together make `size` up to max_size: a program that
 *    alternates a 4 MiB and a 2 MiB buffer keeps one 4 MiB mapping;
 *  - the front of t, else of c, when it is larger than asked and at most
 *    twice the size and not idle past the decay (about to go back, and
 *    cold); the rest stays cached as a block of its own, the two parts of
 *    one mapping.
 * Never a block with a registration (it covers the whole mapping).  Under
 * hp_lock; the rest's caching may evict blocks into victims[] (the rest
 * itself, if it cannot be cached). */
static bool usable(const hp_block *b, int node, hugepool_kind kind) {
  return b->kind == kind && (node == HUGEPOOL_ANY_NODE || b->node == node) && !registrar_holds(b->addr, b->size);
}

static bool splittable(const hp_block *b, long long since_ms, size_t size) {
  long long decay = atomic_load_explicit(&decay_ms, memory_order_relaxed);
  return b->size > size && b->size / 2 <= size && (!decay || since_ms == 0 || os_coarse_ms() - since_ms < decay);
}

static bool take_last_freed(hp_tcache *tc, size_t size, size_t max_size, int node, hugepool_kind kind, hp_block *out,
                            hp_block *victims, size_t *n_victims) {
  hp_block t, c;
  long long t_ms = 0, c_ms = 0;
  bool has_t = tc && tcache_newest(tc, &t, &t_ms) && usable(&t, node, kind);
  bool has_c = cache_newest(&c, &c_ms) && usable(&c, node, kind);
  if (has_t && has_c && t.node == c.node && t.size + c.size >= size && t.size + c.size <= max_size &&
      ((char *)t.addr + t.size == (char *)c.addr || (char *)c.addr + c.size == (char *)t.addr)) {
    tcache_take_newest(tc);
    cache_take_newest();
    *out = (hp_block){.addr = t.addr < c.addr ? t.addr : c.addr, .size = t.size + c.size, .node = t.node, .kind = kind};
    return true;
  }
  hp_block b;
  if (has_t && splittable(&t, t_ms, size)) {
    tcache_take_newest(tc);
    b = t;
  } else if (has_c && splittable(&c, c_ms, size)) {
    cache_take_newest();
    b = c;
  } else {
    return false;
  }
  hp_block rest = {.addr = (char *)b.addr + size, .size = b.size - size, .node = b.node, .kind = b.kind};
  *out = (hp_block){.addr = b.addr, .size = size, .node = b.node, .kind = b.kind};
  bool cached = cache_put(&rest, victims, HP_BATCH, n_victims);
  hp_stats.cache_evictions += cached ? *n_victims : *n_victims - 1;
  return true;
}

/* A cached block of this shape: this thread's cache without any shared
 * lock, else the shared cache or another thread's; NULL on a miss. */
static void *take_cached(size_t requested, size_t size, int node, hugepool_kind kind) {
  hp_block b;
  hp_tcache *tc = tcache_self();
  void *p;
  size_t max_size = hp_fit_max(size, hp_unit_of(kind));
  if (tc && tcache_take(tc, size, max_size, requested, node, kind, &p)) return p; /* registered already */
  hp_block victims[HP_BATCH];
  size_t n_victims = 0;
  pthread_mutex_lock(&hp_lock);
  bool hit = cache_take(size, max_size, node, kind, &b) || tcache_steal(size, node, kind, &b);
  if (!hit) {
    /* A miss.  A node short of pages gets this process's cached ones back
     * (as a miss that maps does), and the request maps; else the blocks
     * freed last may serve it. */
    pthread_mutex_unlock(&hp_lock);
    size_t page = hp_page_of(kind);
    if (page && share_pool_low(page)) {
      release_for(kind, SIZE_MAX);
      return NULL;
    }
    pthread_mutex_lock(&hp_lock);
    hit = take_last_freed(tc, size, max_size, node, kind, &b, victims, &n_victims);
  }
  if (!hit) {
    pthread_mutex_unlock(&hp_lock);
    return NULL;
  }
  release_mark(victims, n_victims);
  if (make_live(&b, requested, true) == 0) {
    pthread_mutex_unlock(&hp_lock);
    release_now(victims, n_victims);
    return b.addr;
  }
  release_mark(&b, 1);
  pthread_mutex_unlock(&hp_lock);
  release_now(victims, n_victims);
  release_now(&b, 1);
  errno = ENOMEM;
  return NULL;
}

static _Atomic size_t prefault_bytes;
static atomic_bool prefault_by_nodes; /* the default: 0 on a node with several first-touch nodes */

void alloc_set_prefault(size_t bytes, bool by_nodes) {
  atomic_store_explicit(&prefault_bytes, bytes, memory_order_relaxed);
  atomic_store_explicit(&prefault_by_nodes, by_nodes, memory_order_relaxed);
}

/* HUGEPOOL_PREFAULT: the kernel clears a hugetlb page at its first touch,
 * 2 MB at once (bench/RESULTS.md section 26), inside whatever the program
 * is timing: the first write to a fresh buffer.  glibc serves requests of up to its mmap
 * threshold (at most 32 MiB) from heap memory it has already touched, so
 * the first pages of each new block are faulted in now, in the malloc that
 * maps them, in whole pages.  The pages were reserved at mmap: this takes
 * no page the block did not already hold, and a failure leaves them to
 * their first touch (errno kept; a kernel without MADV_POPULATE_WRITE,
 * before 5.14, says EINVAL once and is not asked again). */
static void prefault(void *p, size_t size, size_t page) {
  if (atomic_load_explicit(&prefault_by_nodes, memory_order_relaxed)) {
    if (os_node_count() > 1) atomic_store_explicit(&prefault_bytes, 0, memory_order_relaxed);
    atomic_store_explicit(&prefault_by_nodes, false, memory_order_relaxed);
  }
  size_t want = atomic_load_explicit(&prefault_bytes, memory_order_relaxed);
  size_t bytes = want >= size ? size : want / page * page;
  if (!bytes) return;
  int saved = errno;
  if (os_populate(p, bytes) != 0 && errno == EINVAL) alloc_set_prefault(0, false);
  errno = saved;
}

/* Maps fresh hugetlb memory; with a node, binds and populates it there so a
 * shortage on that node is an error now, not a SIGBUS later. */
static void *map_huge(size_t size, size_t page, int node) {
  void *p = os_map_huge(size, page);
  if (!p) return p;
  if (node == HUGEPOOL_ANY_NODE) {
    prefault(p, size, page);
    return p;
  }
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

/* A refusal has somewhere else to go (shortage.h): a fallback policy, or a
 * caller that serves it elsewhere. */
static bool backoff_applies(void) {
  return hp_embedding()->serves_refusals || hp_current_policy() != HUGEPOOL_POLICY_STRICT;
}

/* Maps a new hugetlb block.  Gives back first what this process caches
 * beyond its share of the node's pool, or all it caches of this page size
 * when the node's free pool is low (share.c).  On ENOMEM, if the pages
 * the cache holds (and releases in flight) could make up the shortfall,
 * evicts just enough of them, waits for other threads' lazy releases, and
 * tries once more. */
static void *map_huge_trying(size_t size, size_t page, int node, hugepool_kind kind);

static void *map_huge_reclaiming(size_t size, size_t page, int node, hugepool_kind kind) {
  if (node == HUGEPOOL_ANY_NODE && backoff_applies() && shortage_known(size, page)) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = map_huge_trying(size, page, node, kind);
  if (p) {
    shortage_over(page);
  } else if (errno == ENOMEM && node == HUGEPOOL_ANY_NODE) {
    shortage_found(size, page);
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
  size_t in_flight = release_in_flight();
  long avail = os_pool_available(page, node);
  size_t have = avail > 0 ? (size_t)avail * page : 0;
  if (cached + in_flight + have < size) {
    errno = ENOMEM; /* hopeless: keep the cache */
    return NULL;
  }
  size_t shortfall = size > have + in_flight ? size - have - in_flight : 0;
  release_for(kind, shortfall);
  release_wait(); /* other threads' lazy releases */
  p = map_huge(size, page, node);
  if (!p) errno = ENOMEM;
  return p;
}

/* Maps a new block of `kind` and registers it. */
static void *map_new(size_t requested, size_t size, int node, hugepool_kind kind, bool *fresh) {
  size_t page = hp_page_of(kind);
  alloc_give_back_idle();
  void *p = page ? map_huge_reclaiming(size, page, node, kind) : map_fallback(size, node, kind == HUGEPOOL_KIND_THP);
  if (!p) return NULL;
  if (page) share_mapped(page, (long long)size);
  hp_block b = {.addr = p, .size = size, .node = node, .kind = kind};
  pthread_mutex_lock(&hp_lock);
  base_stats_mapped(size);
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
  if (!hp_embedding()->serves_refusals) hp_stats.failures++; /* else counted where it is served, as a fallback */
  pthread_mutex_unlock(&hp_lock);
  errno = ENOMEM;
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
  size_t size = hp_round_up(bytes, page);
  if (size == 0) {
    errno = ENOMEM;
    return NULL;
  }
  hugepool_kind kind = hp_kind_of_page(page);
  void *p = take_cached(bytes, size, node, kind);
  if (p) {
    if (hp_trace_on()) hp_trace(HP_TRACE_HIT, "%zu bytes from a cached buffer at %p: no system call, no fault", bytes, p);
    return p;
  }
  p = map_new(bytes, size, node, kind, fresh);
  if (p && hp_trace_on())
    hp_trace(HP_TRACE_MAP, "%zu bytes on %zu new %s pages at %p, reserved by the kernel now", bytes, size / page,
             page == HP_1G ? "1 GB" : "2 MB", p);
  if (p || errno != ENOMEM) return p;

  hugepool_policy policy = hp_current_policy();
  if (policy == HUGEPOOL_POLICY_STRICT) {
    hp_report_shortage(bytes, page, node); /* the size asked for, as the program knows it */
    count_failure();
    return NULL;
  }
  hugepool_kind fallback = policy == HUGEPOOL_POLICY_THP ? HUGEPOOL_KIND_THP : HUGEPOOL_KIND_SMALL;
  size_t fallback_size = hp_round_up(bytes, HP_2M);
  p = take_cached(bytes, fallback_size, node, fallback);
  if (!p) p = map_new(bytes, fallback_size, node, fallback, fresh);
  if (!p) count_failure();
  if (p && hp_trace_on())
    hp_trace(HP_TRACE_FALLBACK, "%zu bytes on %s pages at %p: the pool is short (HUGEPOOL_POLICY=%s)", bytes,
             fallback == HUGEPOOL_KIND_THP ? "THP" : "4 KB", p, hp_policy_name(policy));
  return p;
}

static void release_one(hp_block *b) {
  pthread_mutex_lock(&hp_lock);
  release_mark(b, 1);
  pthread_mutex_unlock(&hp_lock);
  release_now(b, 1);
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
    if (own == 2) { /* over this process's share of the pool: a slow path */
      release_one(&b);
      alloc_give_back_idle();
    }
    errno = saved;
    return true;
  }
  int busy = live_take(ptr, &b);
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
  size_t page = hp_page_of((hugepool_kind)b.kind);
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
  if (!tc) base_stats_death(&hp_stats, &b); /* no thread cache: count here */
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
  alloc_give_back_idle();
  errno = saved;
  return true;
}

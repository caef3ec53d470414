/* SPDX-License-Identifier: BSD-3-Clause */
/* Where the small heap's memory comes from: jemalloc's extent hooks for the
 * heap's arenas, carving extents out of 2 MB hugetlb chunks from hugepool.
 *
 * Rules this file keeps:
 * 1. Every chunk is a hugepool_alloc(2 MB) of kind HUGEPOOL_KIND_HUGE_2M:
 *    hugetlb, 2 MB aligned, reserved at mmap (hugepool never uses
 *    MAP_NORESERVE), so a short pool is a NULL here and a fallback to glibc
 *    in the caller, never a SIGBUS later.  Being hugepool buffers, chunks
 *    get hugepool's fork handling (HUGEPOOL_FORK) like any other.
 * 2. A chunk's first 4 KB page holds its map (a bit per page: given to
 *    jemalloc, or ever written: all of a chunk that was a buffer from
 *    hugepool's cache, which holds a program's old bytes); jemalloc gets
 *    the other 511 pages.  So no heap object is 2 MB aligned (free() still
 *    tells hugepool's buffers by alignment), and an extent never crosses a
 *    chunk: jemalloc may merge two extents only inside one chunk.
 * 3. When jemalloc gives an extent back (dalloc, after its decay time) and
 *    the chunk has no page left in use, the chunk goes back to the pool at
 *    once (hp_free_to_pool: unmapped, not cached), so a program that frees
 *    its heap does not keep its peak.  Only dalloc/split/merge are offered:
 *    without purge or decommit hooks, jemalloc gives memory back by dalloc
 *    only, and nothing ever unmaps part of a huge page.
 * 4. One mutex guards the chunks; only jemalloc's slow paths (a new slab or
 *    large extent, a decay) come here, never a malloc served from a thread
 *    cache or a bin.
 * 5. The hooks run inside jemalloc: anything they allocate must not reach
 *    the heap again (the interposer reads SH_THREAD.in_hook and sends it
 *    to glibc).
 * 6. Which pointers are ours: one bit per 2 MB of address space (8 MB of
 *    virtual memory, touched only where chunks live), read without a lock.
 *    A chunk's bit is set before jemalloc sees any of it and cleared before
 *    it is unmapped. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include <hugepool/hugepool.h> /* HUGEPOOL_KIND_HUGE_2M */

#include "heap.h"

#define PAGE ((size_t)4096)
#define PAGES (HPL_2M / PAGE) /* 512 per chunk, page 0 the map */
#define WORDS (PAGES / 64)
#define ADDR_BITS 47

typedef struct chunk {
  struct chunk *prev, *next; /* all chunks, by address */
  uint64_t used[WORDS];      /* page given to jemalloc (page 0: the map) */
  uint64_t written[WORDS];   /* page given out at least once: not known zero */
  uint32_t n_used;           /* pages given to jemalloc */
} chunk;

_Static_assert(sizeof(chunk) <= PAGE, "a chunk's map must fit in its first page");

static pthread_mutex_t chunk_lock = PTHREAD_MUTEX_INITIALIZER;
static chunk *chunks; /* chunk_lock; sorted by address: lowest first fit */
static _Atomic(uint64_t) *owner_bits;
static _Atomic uint64_t n_live, n_peak, n_returned, n_short, pages_used;
atomic_bool hc_grown;

bool hc_owns(const void *ptr) {
  uintptr_t bit = (uintptr_t)ptr >> 21;
  if (bit >= ((uintptr_t)1 << (ADDR_BITS - 21))) return false;
  return (atomic_load_explicit(&owner_bits[bit / 64], memory_order_acquire) >> (bit % 64)) & 1;
}

static void set_owner(const void *base, bool on) {
  uintptr_t bit = (uintptr_t)base >> 21;
  uint64_t mask = (uint64_t)1 << (bit % 64);
  if (on)
    atomic_fetch_or_explicit(&owner_bits[bit / 64], mask, memory_order_release);
  else
    atomic_fetch_and_explicit(&owner_bits[bit / 64], ~mask, memory_order_release);
}

static void bits_set(uint64_t *map, size_t from, size_t n, bool on) {
  for (size_t i = from; i < from + n; i++) {
    uint64_t mask = (uint64_t)1 << (i % 64);
    if (on)
      map[i / 64] |= mask;
    else
      map[i / 64] &= ~mask;
  }
}

/* First page at or after `from` whose bit is `value`; PAGES if none. */
static size_t next_with(const uint64_t *map, size_t from, bool value) {
  while (from < PAGES) {
    uint64_t w = value ? map[from / 64] : ~map[from / 64];
    w &= ~(uint64_t)0 << (from % 64);
    if (w) return (from & ~(size_t)63) + (size_t)__builtin_ctzll(w);
    from = (from & ~(size_t)63) + 64;
  }
  return PAGES;
}

/* The chunk holding p (pointer arithmetic, not an integer cast). */
static chunk *chunk_of(void *p) { return (chunk *)((char *)p - ((uintptr_t)p & (HPL_2M - 1))); }

static bool range_free(const chunk *c, size_t first, size_t n) {
  return first >= 1 && first + n <= PAGES && next_with(c->used, first, true) >= first + n;
}

/* First fit of n pages aligned to `align_pages` in c; 0 if none (page 0 is
 * never free). */
static size_t find_pages(const chunk *c, size_t n, size_t align_pages) {
  size_t at = 1;
  while ((at = next_with(c->used, at, false)) < PAGES) {
    size_t start = (at + align_pages - 1) & ~(align_pages - 1);
    size_t end = next_with(c->used, at, true);
    if (start + n <= end) return start;
    at = end;
  }
  return 0;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no system call */
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* After a shortage the pool is looked at again at most this often: small
 * requests go to glibc meanwhile at the cost of a clock read, and pages
 * reserved later are used within a millisecond. */
#define RETRY_NS 1000000u

/* The time before which no chunk is asked for, after a refusal; 0 once it
 * has passed (the first hc_short() to see it so clears it) or a chunk was
 * had.  Stored under chunk_lock. */
static _Atomic uint64_t short_until;
static bool pool_was_short; /* chunk_lock: the last chunk asked for was refused */

/* While short, a thread reads the clock once every SHORT_SKIP + 1 of its
 * requests, not at each: a clock read (60 ns on this project's VM, under
 * load) cost more than the glibc malloc that serves the request.  So the
 * heap is used again a millisecond after a refusal, or after the thread's
 * next SHORT_SKIP requests, whichever is later. */
#define SHORT_SKIP 63

bool hc_short(void) {
  uint64_t until = atomic_load_explicit(&short_until, memory_order_relaxed);
  if (HPL_LIKELY(until == 0)) return false;
  if (SH_THREAD.short_skip > 0) {
    SH_THREAD.short_skip--;
    return true;
  }
  SH_THREAD.short_skip = SHORT_SKIP;
  if (now_ns() < until) return true;
  atomic_compare_exchange_strong_explicit(&short_until, &until, 0, memory_order_relaxed, memory_order_relaxed);
  return false;
}

static chunk *refused(uint64_t now) {
  pool_was_short = true;
  atomic_store_explicit(&short_until, now + RETRY_NS, memory_order_relaxed);
  return NULL;
}

/* The caller holds chunk_lock. */
static chunk *new_chunk(void) {
  if (pool_was_short) {
    uint64_t now = now_ns(), until = atomic_load_explicit(&short_until, memory_order_relaxed);
    if (until && now < until) return NULL;
    if (sh_core.pool_free_pages() <= 0) return refused(now);
  }
  bool fresh = false; /* newly mapped: zero; else a cached buffer with a program's old bytes */
  chunk *c = sh_core.chunk_alloc(&fresh);
  if (!c || sh_core.kind_of(c) != HUGEPOOL_KIND_HUGE_2M) {
    if (c) sh_core.chunk_free(c); /* a THP / 4 KB fallback (HUGEPOOL_POLICY=thp|small): not for us */
    atomic_fetch_add_explicit(&n_short, 1, memory_order_relaxed);
    return refused(now_ns());
  }
  pool_was_short = false;
  atomic_store_explicit(&short_until, 0, memory_order_relaxed);
  memset(c, 0, sizeof(*c));
  if (!fresh) memset(c->written, 0xff, sizeof(c->written)); /* jemalloc must not take these pages for zero */
  c->used[0] = 1;                                           /* page 0: this map */
  c->written[0] |= 1;
  c->n_used = 1;
  chunk **at = &chunks, *prev = NULL;
  while (*at && *at < c) prev = *at, at = &(*at)->next;
  c->next = *at;
  c->prev = prev;
  if (*at) (*at)->prev = c;
  *at = c;
  set_owner(c, true);
  uint64_t live = atomic_fetch_add_explicit(&n_live, 1, memory_order_relaxed) + 1;
  if (live > atomic_load_explicit(&n_peak, memory_order_relaxed))
    atomic_store_explicit(&n_peak, live, memory_order_relaxed);
  if (live == HC_GROWN_CHUNKS) atomic_store_explicit(&hc_grown, true, memory_order_relaxed);
  return c;
}

/* Takes pages [first, first + n) of c for jemalloc; zeroes them if asked and
 * tells jemalloc whether they are zero.  The caller holds chunk_lock. */
static void *take(chunk *c, size_t first, size_t n, bool *zero) {
  char *addr = (char *)c + first * PAGE;
  bool fresh = next_with(c->written, first, true) >= first + n; /* never written since mmap: zero */
  bits_set(c->used, first, n, true);
  bits_set(c->written, first, n, true);
  c->n_used += (uint32_t)n;
  atomic_fetch_add_explicit(&pages_used, n, memory_order_relaxed);
  if (*zero && !fresh) memset(addr, 0, n * PAGE);
  if (fresh) *zero = true;
  return addr;
}

static void *extent_alloc(extent_hooks_t *hooks, void *new_addr, size_t size, size_t alignment, bool *zero,
                          bool *commit, unsigned arena_ind) {
  (void)hooks, (void)arena_ind;
  size_t n = size / PAGE;
  if (size % PAGE || n == 0 || n >= PAGES || alignment > HPL_2M / 2) return NULL;
  size_t align_pages = alignment <= PAGE ? 1 : alignment / PAGE;
  SH_THREAD.in_hook++;
  void *p = NULL;
  pthread_mutex_lock(&chunk_lock);
  if (new_addr) { /* growth in place: only if the pages after an extent are free */
    chunk *c = chunk_of(new_addr);
    size_t first = ((uintptr_t)new_addr - (uintptr_t)c) / PAGE;
    if (hc_owns(new_addr) && (uintptr_t)new_addr % PAGE == 0 && range_free(c, first, n)) p = take(c, first, n, zero);
  } else {
    for (chunk *c = chunks; c && !p; c = c->next) {
      if (PAGES - c->n_used < n) continue;
      size_t first = find_pages(c, n, align_pages);
      if (first) p = take(c, first, n, zero);
    }
    if (!p) {
      chunk *c = new_chunk();
      size_t first = c ? find_pages(c, n, align_pages) : 0;
      if (first) p = take(c, first, n, zero);
    }
  }
  pthread_mutex_unlock(&chunk_lock);
  SH_THREAD.in_hook--;
  if (p) *commit = true;
  return p;
}

static bool extent_dalloc(extent_hooks_t *hooks, void *addr, size_t size, bool committed, unsigned arena_ind) {
  (void)hooks, (void)committed, (void)arena_ind;
  chunk *c = chunk_of(addr);
  size_t first = ((uintptr_t)addr - (uintptr_t)c) / PAGE, n = size / PAGE;
  chunk *empty = NULL;
  SH_THREAD.in_hook++;
  pthread_mutex_lock(&chunk_lock);
  bits_set(c->used, first, n, false);
  c->n_used -= (uint32_t)n;
  atomic_fetch_sub_explicit(&pages_used, n, memory_order_relaxed);
  if (c->n_used == 1) { /* only the map: the chunk goes back */
    if (c->prev)
      c->prev->next = c->next;
    else
      chunks = c->next;
    if (c->next) c->next->prev = c->prev;
    set_owner(c, false);
    empty = c;
  }
  pthread_mutex_unlock(&chunk_lock);
  if (empty) {
    sh_core.chunk_free(empty); /* unmapped outside the lock */
    atomic_fetch_sub_explicit(&n_live, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&n_returned, 1, memory_order_relaxed);
  }
  SH_THREAD.in_hook--;
  return false; /* done: jemalloc forgets the extent */
}

static void extent_destroy(extent_hooks_t *hooks, void *addr, size_t size, bool committed, unsigned arena_ind) {
  extent_dalloc(hooks, addr, size, committed, arena_ind);
}

static bool extent_split(extent_hooks_t *hooks, void *addr, size_t size, size_t size_a, size_t size_b, bool committed,
                         unsigned arena_ind) {
  (void)hooks, (void)addr, (void)size, (void)size_a, (void)size_b, (void)committed, (void)arena_ind;
  return false; /* pages are tracked one by one: any split is fine */
}

static bool extent_merge(extent_hooks_t *hooks, void *addr_a, size_t size_a, void *addr_b, size_t size_b,
                         bool committed, unsigned arena_ind) {
  (void)hooks, (void)size_a, (void)committed, (void)arena_ind;
  uintptr_t last = (uintptr_t)addr_b + size_b - 1;
  return ((uintptr_t)addr_a & ~(HPL_2M - 1)) != (last & ~(HPL_2M - 1)); /* true: refused across chunks */
}

static extent_hooks_t hooks = {
    .alloc = extent_alloc,
    .dalloc = extent_dalloc,
    .destroy = extent_destroy,
    .commit = NULL, /* always committed */
    .decommit = NULL,
    .purge_lazy = NULL, /* no partial purge of a huge page: memory goes back by dalloc only */
    .purge_forced = NULL,
    .split = extent_split,
    .merge = extent_merge,
};

static void lock_prepare(void) { pthread_mutex_lock(&chunk_lock); }
static void unlock_parent(void) { pthread_mutex_unlock(&chunk_lock); }
static void unlock_child(void) { pthread_mutex_init(&chunk_lock, NULL); }

extent_hooks_t *hc_init(void) {
  void *bits = sh_core.map_sparse(((size_t)1 << (ADDR_BITS - 21)) / 8);
  if (!bits) return NULL;
  owner_bits = bits;
  /* Registered before jemalloc's own handlers, so it runs after them at
   * fork (prepare handlers run in reverse order): jemalloc's locks, which a
   * decay holds while it calls dalloc, come before ours, as they do there. */
  pthread_atfork(lock_prepare, unlock_parent, unlock_child);
  return &hooks;
}

void hc_stats(hc_counters *out) {
  out->chunks = atomic_load_explicit(&n_live, memory_order_relaxed);
  out->chunks_peak = atomic_load_explicit(&n_peak, memory_order_relaxed);
  out->chunks_returned = atomic_load_explicit(&n_returned, memory_order_relaxed);
  out->shortages = atomic_load_explicit(&n_short, memory_order_relaxed);
  out->bytes_in_extents = atomic_load_explicit(&pages_used, memory_order_relaxed) * PAGE;
}

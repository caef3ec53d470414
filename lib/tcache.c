/* SPDX-License-Identifier: BSD-3-Clause */
/* Thread tcache_list: each thread keeps its last few freed blocks.
 *
 * Why: with one lock for everything, two threads each reusing their own
 * buffer queue on that lock and pass its cache line back and forth at every
 * call (about 10x the one-thread cost on a 2-core machine).  A thread's
 * cache, its counters and its lock share one cache line that only this
 * thread writes in the common case, so a hit or a free touches nothing
 * another thread touches (the registry is striped for the same reason).
 *
 * A block a thread cache holds keeps its entry in the registry of live
 * buffers (marked with the cache and the entry), whether it is cached or
 * handed out: a hit and the owner's free of the block it handed out change
 * the thread cache's entry alone, never the registry.  Another thread that
 * frees, resizes or asks about such a block finds the mark in the registry
 * and asks the thread cache (tcache_detach, tcache_lookup); a block that
 * leaves a thread cache for good (stolen, drained, evicted, freed by another
 * thread, resized) leaves with its mark.
 *
 * Limits stay exact through leases: an entry holds room in the cache's
 * limits (cache_lease) for one block, whether the block is there or handed
 * out, so a thread that frees what it allocated refills the entry without
 * asking the shared cache.  Leases are taken and given back under hp_lock
 * only (slow paths), which also guards the list of tcache_list and their owner.
 *
 * Lock order: hp_lock, then any number of thread-cache locks (only a holder
 * of hp_lock takes more than one); the fast paths take their own thread's
 * lock alone.  Another thread takes a cache's lock to steal a block, to
 * drain it (trim, reclaim, fork) or to read its counters (tcache-all.c). */
#define _GNU_SOURCE
#include "tcache.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "cache.h"
#include "registry.h"
#include "share.h"
#include "tcache-entry.h"

_Static_assert(sizeof(hugepool_stats) % sizeof(uint64_t) == 0, "hugepool_stats is made of uint64_t counters");

hp_tcache *tcache_list; /* every thread cache ever made (hp_lock) */
static atomic_bool stamping; /* HUGEPOOL_CACHE_DECAY is on: freed blocks get their time */
static pthread_key_t exit_key;
static __thread hp_tcache *self __attribute__((tls_model("initial-exec")));
static void (*on_exit_fn)(hp_tcache *tc);

static void thread_exit(void *arg) {
  self = NULL;
  if (on_exit_fn) on_exit_fn((hp_tcache *)arg);
}

void tcache_init(void (*on_thread_exit)(hp_tcache *tc)) {
  on_exit_fn = on_thread_exit;
  if (pthread_key_create(&exit_key, thread_exit) != 0) on_exit_fn = NULL;
}

hp_tcache *tcache_self(void) {
  hp_tcache *tc = self;
  if (__builtin_expect(tc != NULL, 1)) return tc;
  pthread_mutex_lock(&hp_lock);
  for (tc = tcache_list; tc && tc->owned; tc = tc->next) {
  }
  if (!tc) { /* a new cache on its own pages: no false sharing */
    tc = os_map_meta(sizeof(hp_tcache));
    if (tc) {
      tc->next = tcache_list;
      tcache_list = tc;
    }
  }
  if (tc) tc->owned = true;
  pthread_mutex_unlock(&hp_lock);
  if (tc) {
    self = tc;
    if (on_exit_fn) (void)pthread_setspecific(exit_key, tc);
  }
  return tc;
}

hp_tcache *tcache_self_if_any(void) { return self; }

void tcache_set_stamping(bool on) { atomic_store_explicit(&stamping, on, memory_order_relaxed); }

/* When a block is freed into a cache: the coarse clock (4 ns) while a decay
 * is set, else 0, which tcache_drain_idle reads as "first seen idle now". */
static long long stamp_now(void) {
  return atomic_load_explicit(&stamping, memory_order_relaxed) ? os_coarse_ms() : 0;
}

/* The block as the registry marks it. */
static hp_block marked(hp_tcache *tc, tc_entry *e) {
  hp_block b = e->b;
  b.tc = tc;
  b.tc_slot = (uint32_t)(e - tc->e);
  return b;
}

/* The block of e leaves this cache: its registry entry goes, or (keep)
 * becomes a plain live entry equal to *plain.  The lease stays with e. */
void tcache_unmark(hp_tcache *tc, tc_entry *e, bool keep, const hp_block *plain) {
  hp_block b = keep ? *plain : e->b;
  b.tc = tc;
  b.tc_slot = (uint32_t)(e - tc->e);
  (void)registry_detach(&b, keep);
  e->b.addr = NULL;
  e->state = EMPTY;
}

static void count_alloc(hugepool_stats *st, const hp_block *b) {
  base_stats_birth(st, b);
  st->cache_hits++;
}

static bool fits(const tc_entry *e, size_t size, size_t max_size, int node, hugepool_kind kind) {
  const hp_block *s = &e->b;
  return e->state == CACHED && s->size >= size && s->size <= max_size && s->kind == kind &&
         (node == HUGEPOOL_ANY_NODE || s->node == node);
}

bool tcache_take(hp_tcache *tc, size_t size, size_t max_size, size_t requested, int node, hugepool_kind kind,
                 void **out) {
  hp_spin_lock(&tc->lock);
  tc_entry *best = NULL;
  for (size_t i = 0; i < ENTRIES; i++) {
    tc_entry *e = &tc->e[i];
    if (!fits(e, size, max_size, node, kind)) continue;
    /* The smallest; of equal ones the last freed, whose lines a cache may
     * still hold (glibc and jemalloc reuse last-in first-out too). */
    if (!best || e->b.size < best->b.size || (e->b.size == best->b.size && e->age > best->age)) best = e;
  }
  if (best) {
    best->state = OUT; /* the registry entry stays as it is */
    best->b.requested = requested;
    count_alloc(&tc->delta, &best->b);
    *out = best->b.addr;
  }
  hp_spin_unlock(&tc->lock);
  return best != NULL;
}

int tcache_free_own(hp_tcache *tc, const void *addr, hp_block *out) {
  hp_spin_lock(&tc->lock);
  for (size_t i = 0; i < ENTRIES; i++) {
    tc_entry *e = &tc->e[i];
    if (e->state != OUT || e->b.addr != addr) continue;
    base_stats_death(&tc->delta, &e->b);
    size_t page = hp_page_of((hugepool_kind)e->b.kind);
    bool may_cache = !page || share_may_cache(page);
    e->b.requested = 0;
    if (may_cache) {
      e->state = CACHED;
      e->age = ++tc->clock;
      e->since_ms = stamp_now();
      hp_spin_unlock(&tc->lock);
      return 1;
    }
    *out = e->b;
    tcache_unmark(tc, e, false, NULL);
    hp_spin_unlock(&tc->lock);
    return 2;
  }
  hp_spin_unlock(&tc->lock);
  return 0;
}

bool tcache_find_own(hp_tcache *tc, const void *addr, hp_block *out) {
  bool found = false;
  hp_spin_lock(&tc->lock);
  for (size_t i = 0; i < ENTRIES && !found; i++) {
    if (tc->e[i].state == OUT && tc->e[i].b.addr == addr) {
      *out = tc->e[i].b;
      found = true;
    }
  }
  hp_spin_unlock(&tc->lock);
  return found;
}

int tcache_lookup(const hp_block *copy, hp_block *out) {
  hp_tcache *tc = copy->tc;
  tc_entry *e = &tc->e[copy->tc_slot % ENTRIES];
  hp_spin_lock(&tc->lock);
  int rc = e->b.addr != copy->addr ? -1 : e->state == OUT ? 1 : 0;
  if (rc == 1) *out = e->b;
  hp_spin_unlock(&tc->lock);
  return rc;
}

int tcache_detach(const hp_block *copy, bool resizing, hp_block *out) {
  hp_tcache *tc = copy->tc;
  tc_entry *e = &tc->e[copy->tc_slot % ENTRIES];
  hp_spin_lock(&tc->lock);
  int err = e->b.addr != copy->addr ? EAGAIN : e->state == OUT ? 0 : EINVAL;
  if (!err) {
    *out = e->b;
    out->resizing = resizing;
    tcache_unmark(tc, e, resizing, out); /* the lease stays: the owner's next free refills it */
  }
  hp_spin_unlock(&tc->lock);
  return err;
}

/* Caches plain block b in e (which the caller made EMPTY, with a lease that
 * fits): its registry entry comes back, marked.  false: no metadata. */
static bool place(hp_tcache *tc, tc_entry *e, const hp_block *b) {
  e->b = *b;
  e->b.requested = 0;
  e->b.headroom = 0;
  e->b.resizing = 0;
  hp_block m = marked(tc, e);
  m.tc_slot = (uint32_t)(e - tc->e);
  if (registry_insert(&m) != 0) {
    e->b.addr = NULL;
    return false;
  }
  e->state = CACHED;
  e->age = ++tc->clock;
  e->since_ms = stamp_now();
  return true;
}

bool tcache_put_fast(hp_tcache *tc, const hp_block *b, bool may_cache) {
  hp_spin_lock(&tc->lock);
  base_stats_death(&tc->delta, b);
  for (size_t i = 0; may_cache && i < ENTRIES; i++) {
    tc_entry *e = &tc->e[i];
    if (e->state == EMPTY && e->lease >= b->size) {
      bool ok = place(tc, e, b);
      hp_spin_unlock(&tc->lock);
      return ok;
    }
  }
  hp_spin_unlock(&tc->lock);
  return false;
}

void tcache_drop_lease(tc_entry *e) {
  if (e->lease) cache_unlease(e->lease);
  e->lease = 0;
}

/* The oldest cached entry other than `skip`, or NULL. */
static tc_entry *oldest(hp_tcache *tc, const tc_entry *skip) {
  tc_entry *best = NULL;
  for (size_t i = 0; i < ENTRIES; i++) {
    tc_entry *e = &tc->e[i];
    if (e != skip && e->state == CACHED && (!best || e->age < best->age)) best = e;
  }
  return best;
}

bool tcache_put_slow(hp_tcache *tc, const hp_block *b, hp_block *victims, size_t max_victims, size_t *n_victims) {
  *n_victims = 0;
  if (cache_max_slots() == 0 || b->size > cache_max_bytes()) return false;
  hp_spin_lock(&tc->lock);
  tc_entry *slot = NULL;
  for (size_t i = 0; i < ENTRIES && !slot; i++) {
    if (tc->e[i].state == EMPTY) slot = &tc->e[i];
  }
  if (!slot) {
    /* No entry is empty: the oldest cached block moves to the shared cache
     * (its lease becomes that cache's slot, the totals do not change), and
     * the block freed now - the likelier to be wanted next - takes its
     * place.  Entries whose blocks are handed out keep them. */
    slot = oldest(tc, NULL);
    if (!slot) {
      hp_spin_unlock(&tc->lock);
      return false;
    }
    hp_block moved = slot->b;
    tcache_unmark(tc, slot, false, NULL);
    tcache_drop_lease(slot);
    cache_add_unchecked(&moved, victims, max_victims, n_victims);
  }
  tcache_drop_lease(slot); /* too small for b */
  /* Unused leases of this thread go back first: they hold room, no memory. */
  for (size_t i = 0; i < ENTRIES; i++) {
    if (tc->e[i].state == EMPTY) tcache_drop_lease(&tc->e[i]);
  }
  /* Evicting this thread's own blocks is worth it only if they free enough. */
  size_t own_n = 0, own_bytes = 0;
  for (size_t i = 0; i < ENTRIES; i++) {
    if (tc->e[i].state == CACHED) {
      own_n++;
      own_bytes += tc->e[i].lease;
    }
  }
  bool may_evict_own = cache_lease_fits(b->size, own_n, own_bytes);
  for (;;) {
    size_t k = 0;
    if (cache_lease(b->size, victims + *n_victims, max_victims - *n_victims, &k)) {
      *n_victims += k;
      slot->lease = b->size;
      bool ok = place(tc, slot, b);
      if (!ok) tcache_drop_lease(slot);
      hp_spin_unlock(&tc->lock);
      return ok;
    }
    /* The limits are held by this thread's own blocks: its oldest goes,
     * as the oldest cached block would in the shared cache. */
    tc_entry *victim = may_evict_own ? oldest(tc, slot) : NULL;
    if (!victim || *n_victims + 1 >= max_victims) break;
    victims[(*n_victims)++] = victim->b;
    tcache_unmark(tc, victim, false, NULL);
    tcache_drop_lease(victim);
  }
  hp_spin_unlock(&tc->lock);
  return false;
}

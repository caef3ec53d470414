/* Thread caches: each thread keeps its last few freed blocks.
 *
 * Why: with one lock for everything, two threads each reusing their own
 * buffer queue on that lock and pass its cache line back and forth at every
 * call (about 10x the one-thread cost on a 2-core machine).  A thread's
 * cache, its counters and its lock share one cache line that only this
 * thread writes in the common case, so a hit or a free touches nothing
 * another thread touches (the registry is striped for the same reason).
 *
 * Limits stay exact through leases: an entry holds room in the cache's
 * limits (cache_lease) for one block, whether the block is there or handed
 * out, so a thread that frees what it allocated refills the entry without
 * asking the shared cache.  Leases are taken and given back under hp_lock
 * only (slow paths), which also guards the list of caches and their owner.
 *
 * Lock order: hp_lock, then any number of thread-cache locks (only a holder
 * of hp_lock takes more than one); the fast paths take their own thread's
 * lock alone.  Another thread takes a cache's lock to steal a block, to
 * drain it (trim, reclaim, fork) or to read its counters. */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>

#include "internal.h"
#include "spin.h"

#define ENTRIES 4

typedef struct tc_entry {
  hp_block b;   /* b.addr == NULL: empty */
  size_t lease; /* bytes of room held in the cache's limits, 0: none */
  uint64_t age; /* when b was put here, for the oldest-first victim */
} tc_entry;

struct hp_tcache {
  hp_spin lock;
  bool owned; /* a live thread uses it (hp_lock) */
  hp_tcache *next;
  uint64_t clock;
  tc_entry e[ENTRIES];
  hugepool_stats delta; /* the fast paths' counters, summed into the totals */
} __attribute__((aligned(64)));

_Static_assert(sizeof(hugepool_stats) % sizeof(uint64_t) == 0, "hugepool_stats is made of uint64_t counters");

static hp_tcache *caches; /* every thread cache ever made (hp_lock) */
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
  for (tc = caches; tc && tc->owned; tc = tc->next) {
  }
  if (!tc) { /* a new cache on its own pages: no false sharing */
    tc = os_map_meta(sizeof(hp_tcache));
    if (tc) {
      tc->next = caches;
      caches = tc;
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

static bool matches(const hp_block *s, size_t size, int node, hugepool_kind kind) {
  return s->addr && s->size == size && s->kind == kind && (node == HUGEPOOL_ANY_NODE || s->node == node);
}

static void count_alloc(hugepool_stats *st, const hp_block *b) {
  st->allocs++;
  st->cache_hits++;
  st->live_buffers++;
  st->bytes_live += b->size;
  st->bytes_requested += b->requested;
  st->bytes_slack += b->size - b->requested;
  if (b->kind == HUGEPOOL_KIND_THP) st->fallbacks_thp++;
  if (b->kind == HUGEPOOL_KIND_SMALL) st->fallbacks_small++;
}

bool tcache_take(hp_tcache *tc, size_t size, size_t requested, int node, hugepool_kind kind, hp_block *out) {
  hp_spin_lock(&tc->lock);
  for (size_t i = 0; i < ENTRIES; i++) {
    if (matches(&tc->e[i].b, size, node, kind)) {
      *out = tc->e[i].b;
      out->requested = requested;
      tc->e[i].b.addr = NULL; /* the lease stays: the free refills it */
      count_alloc(&tc->delta, out);
      hp_spin_unlock(&tc->lock);
      return true;
    }
  }
  hp_spin_unlock(&tc->lock);
  return false;
}

void tcache_uncount(hp_tcache *tc, const hp_block *b) {
  hp_spin_lock(&tc->lock);
  hugepool_stats *st = &tc->delta;
  st->allocs--;
  st->cache_hits--;
  st->live_buffers--;
  st->bytes_live -= b->size;
  st->bytes_requested -= b->requested;
  st->bytes_slack -= b->size - b->requested;
  if (b->kind == HUGEPOOL_KIND_THP) st->fallbacks_thp--;
  if (b->kind == HUGEPOOL_KIND_SMALL) st->fallbacks_small--;
  hp_spin_unlock(&tc->lock);
}

static void count_free(hugepool_stats *st, const hp_block *b) {
  st->frees++;
  st->live_buffers--;
  st->bytes_live -= b->size;
  st->bytes_requested -= b->requested;
  st->bytes_slack -= b->size - b->requested;
}

bool tcache_put_fast(hp_tcache *tc, const hp_block *b, bool may_cache) {
  hp_spin_lock(&tc->lock);
  count_free(&tc->delta, b);
  for (size_t i = 0; may_cache && i < ENTRIES; i++) {
    tc_entry *e = &tc->e[i];
    if (!e->b.addr && e->lease >= b->size) {
      e->b = *b;
      e->b.requested = 0;
      e->age = ++tc->clock;
      hp_spin_unlock(&tc->lock);
      return true;
    }
  }
  hp_spin_unlock(&tc->lock);
  return false;
}

static void drop_lease(tc_entry *e) {
  if (e->lease) cache_unlease(e->lease);
  e->lease = 0;
}

/* The oldest occupied entry other than `skip`, or NULL. */
static tc_entry *oldest(hp_tcache *tc, const tc_entry *skip) {
  tc_entry *best = NULL;
  for (size_t i = 0; i < ENTRIES; i++) {
    tc_entry *e = &tc->e[i];
    if (e != skip && e->b.addr && (!best || e->age < best->age)) best = e;
  }
  return best;
}

bool tcache_put_slow(hp_tcache *tc, const hp_block *b, hp_block *victims, size_t max_victims, size_t *n_victims) {
  *n_victims = 0;
  if (cache_max_slots() == 0 || b->size > cache_max_bytes()) return false;
  hp_spin_lock(&tc->lock);
  tc_entry *slot = NULL;
  for (size_t i = 0; i < ENTRIES && !slot; i++) {
    if (!tc->e[i].b.addr) slot = &tc->e[i];
  }
  if (!slot) {
    /* Every entry is in use: the oldest block moves to the shared cache (its
     * lease becomes that cache's slot, the totals do not change), and the
     * block freed now - the likelier to be wanted next - takes its place. */
    slot = oldest(tc, NULL);
    drop_lease(slot);
    cache_add_unchecked(&slot->b, victims, max_victims, n_victims);
    slot->b.addr = NULL;
  }
  drop_lease(slot); /* too small for b */
  /* Unused leases of this thread go back first: they hold room, no memory. */
  for (size_t i = 0; i < ENTRIES; i++) {
    if (!tc->e[i].b.addr) drop_lease(&tc->e[i]);
  }
  /* Evicting this thread's own blocks is worth it only if they free enough. */
  size_t own_n = 0, own_bytes = 0;
  for (size_t i = 0; i < ENTRIES; i++) {
    if (tc->e[i].b.addr) {
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
      slot->b = *b;
      slot->b.requested = 0;
      slot->age = ++tc->clock;
      hp_spin_unlock(&tc->lock);
      return true;
    }
    /* The limits are held by this thread's own blocks: its oldest goes,
     * as the oldest cached block would in the shared cache. */
    tc_entry *victim = may_evict_own ? oldest(tc, slot) : NULL;
    if (!victim || *n_victims + 1 >= max_victims) break;
    victims[(*n_victims)++] = victim->b;
    victim->b.addr = NULL;
    drop_lease(victim);
  }
  hp_spin_unlock(&tc->lock);
  return false;
}

bool tcache_steal(size_t size, int node, hugepool_kind kind, hp_block *out) {
  for (hp_tcache *tc = caches; tc; tc = tc->next) {
    hp_spin_lock(&tc->lock);
    for (size_t i = 0; i < ENTRIES; i++) {
      tc_entry *e = &tc->e[i];
      if (matches(&e->b, size, node, kind)) {
        *out = e->b;
        e->b.addr = NULL;
        drop_lease(e);
        hp_spin_unlock(&tc->lock);
        return true;
      }
    }
    hp_spin_unlock(&tc->lock);
  }
  return false;
}

size_t tcache_drain(hugepool_kind kind, hp_block *out, size_t max, size_t *bytes_left) {
  size_t n = 0;
  for (hp_tcache *tc = caches; tc && n < max; tc = tc->next) {
    hp_spin_lock(&tc->lock);
    for (size_t i = 0; i < ENTRIES && n < max && (!bytes_left || *bytes_left > 0); i++) {
      tc_entry *e = &tc->e[i];
      if (!e->b.addr || (kind != HUGEPOOL_KIND_NONE && e->b.kind != kind)) continue;
      out[n++] = e->b;
      if (bytes_left) *bytes_left = *bytes_left > e->b.size ? *bytes_left - e->b.size : 0;
      e->b.addr = NULL;
      drop_lease(e);
    }
    hp_spin_unlock(&tc->lock);
  }
  return n;
}

void tcache_totals(size_t *count, size_t *bytes) {
  *count = *bytes = 0;
  for (hp_tcache *tc = caches; tc; tc = tc->next) {
    hp_spin_lock(&tc->lock);
    for (size_t i = 0; i < ENTRIES; i++) {
      if (!tc->e[i].b.addr) continue;
      (*count)++;
      *bytes += tc->e[i].b.size;
    }
    hp_spin_unlock(&tc->lock);
  }
}

size_t tcache_bytes_of_kind(hugepool_kind kind) {
  size_t bytes = 0;
  for (hp_tcache *tc = caches; tc; tc = tc->next) {
    hp_spin_lock(&tc->lock);
    for (size_t i = 0; i < ENTRIES; i++) {
      if (tc->e[i].b.addr && tc->e[i].b.kind == kind) bytes += tc->e[i].b.size;
    }
    hp_spin_unlock(&tc->lock);
  }
  return bytes;
}

void tcache_sum_stats(hugepool_stats *st) {
  uint64_t *to = (uint64_t *)st;
  for (hp_tcache *tc = caches; tc; tc = tc->next) {
    hp_spin_lock(&tc->lock);
    const uint64_t *from = (const uint64_t *)&tc->delta;
    for (size_t i = 0; i < sizeof(*st) / sizeof(uint64_t); i++) to[i] += from[i];
    hp_spin_unlock(&tc->lock);
  }
}

static void return_one(hp_tcache *tc, hp_block *victims, size_t max_victims, size_t *n_victims) {
  for (size_t i = 0; i < ENTRIES; i++) {
    tc_entry *e = &tc->e[i];
    if (e->b.addr) cache_add_unchecked(&e->b, victims, max_victims, n_victims);
    e->b.addr = NULL;
    drop_lease(e);
  }
}

void tcache_return_all(hp_block *victims, size_t max_victims, size_t *n_victims) {
  for (hp_tcache *tc = caches; tc; tc = tc->next) {
    hp_spin_lock(&tc->lock);
    return_one(tc, victims, max_victims, n_victims);
    hp_spin_unlock(&tc->lock);
  }
}

void tcache_retire(hp_tcache *tc, hp_block *victims, size_t max_victims, size_t *n_victims) {
  hp_spin_lock(&tc->lock);
  return_one(tc, victims, max_victims, n_victims);
  tc->owned = false;
  hp_spin_unlock(&tc->lock);
}

void tcache_lock_all(void) {
  for (hp_tcache *tc = caches; tc; tc = tc->next) hp_spin_lock(&tc->lock);
}

void tcache_unlock_all(void) {
  for (hp_tcache *tc = caches; tc; tc = tc->next) hp_spin_unlock(&tc->lock);
}

void tcache_child_orphan(void) {
  for (hp_tcache *tc = caches; tc; tc = tc->next) tc->owned = tc == self;
}

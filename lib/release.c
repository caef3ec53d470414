/* SPDX-License-Identifier: BSD-3-Clause */
/* Lazy release: blocks chosen under hp_lock go back to the kernel after it
 * is dropped, in batches; release_now() is the one way every block (cached
 * or live) goes back, so whatever must happen when a mapping leaves (the
 * share's count, the shortage's end, the statistics) happens there. */
#define _GNU_SOURCE
#include "release.h"

#include <sched.h>
#include <stdatomic.h>

#include "cache.h"
#include "registrar.h"
#include "share.h"
#include "shortage.h"
#include "tcache.h"

/* Bytes chosen for release but not yet unmapped (lazy release runs outside
 * the lock): an ENOMEM retry waits for them to reach the pool. */
static atomic_size_t releasing;

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
    size_t page = hp_page_of((hugepool_kind)blocks[i].kind);
    if (page) share_mapped(page, -(long long)blocks[i].size);
    if (page) shortage_over(page);
  }
  atomic_fetch_sub(&releasing, bytes);
  pthread_mutex_lock(&hp_lock);
  for (size_t i = 0; i < n; i++) base_stats_unmapped(blocks[i].size);
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

typedef struct idle {
  long long now_ms, cached_by_ms;
} idle;

/* Blocks cached at or before cached_by_ms, the shared cache's then the threads'. */
static size_t take_idle(hp_block *out, size_t max, void *arg) {
  const idle *w = arg;
  size_t n = 0;
  while (n < max && cache_evict_idle(w->cached_by_ms, &out[n])) n++;
  return n + tcache_drain_idle(w->now_ms, w->cached_by_ms, out + n, max - n);
}

size_t release_idle(long long now_ms, long long decay_ms) {
  idle w = {now_ms, now_ms - decay_ms};
  return release_batches(take_idle, &w, &hp_stats.cache_evictions);
}

size_t release_for(hugepool_kind kind, size_t need) {
  reclaim r = {kind, need};
  return need ? release_batches(take_of_kind, &r, &hp_stats.cache_evictions) : 0;
}

void release_wait(void) {
  while (atomic_load(&releasing) > 0) sched_yield();
}

size_t release_in_flight(void) { return atomic_load(&releasing); }

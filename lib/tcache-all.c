/* SPDX-License-Identifier: BSD-3-Clause */
/* Every thread's cache at once, under hp_lock (tcache.h): a steal, a drain
 * (trim, reclaim), the totals and counters, the leases given back before
 * the limits change or when a thread exits, and fork.  The one thread's own
 * cache, its fast paths and the registry handshake are tcache.c's. */
#define _GNU_SOURCE
#include "cache.h"
#include "tcache-entry.h"
#include "tcache.h"

static bool matches(const tc_entry *e, size_t size, int node, hugepool_kind kind) {
  const hp_block *s = &e->b;
  return e->state == CACHED && s->size == size && s->kind == kind && (node == HUGEPOOL_ANY_NODE || s->node == node);
}

/* From the first cache holding a match, its last freed one: the one whose
 * lines a CPU cache may still hold, as tcache_take picks in its own cache. */
bool tcache_steal(size_t size, int node, hugepool_kind kind, hp_block *out) {
  for (hp_tcache *tc = tcache_list; tc; tc = tc->next) {
    hp_spin_lock(&tc->lock);
    tc_entry *best = NULL;
    for (size_t i = 0; i < ENTRIES; i++) {
      tc_entry *e = &tc->e[i];
      if (matches(e, size, node, kind) && (!best || e->age > best->age)) best = e;
    }
    if (best) {
      *out = best->b;
      tcache_unmark(tc, best, false, NULL);
      tcache_drop_lease(best);
    }
    hp_spin_unlock(&tc->lock);
    if (best) return true;
  }
  return false;
}

/* The cached entry of tc freed last (its lock held), or NULL. */
static tc_entry *newest_cached(hp_tcache *tc) {
  tc_entry *newest = NULL;
  for (size_t i = 0; i < ENTRIES; i++) {
    tc_entry *e = &tc->e[i];
    if (e->state == CACHED && (!newest || e->age > newest->age)) newest = e;
  }
  return newest;
}

bool tcache_newest(hp_tcache *tc, hp_block *out, long long *since_ms) {
  hp_spin_lock(&tc->lock);
  tc_entry *e = newest_cached(tc);
  if (e) {
    *out = e->b;
    *since_ms = e->since_ms;
  }
  hp_spin_unlock(&tc->lock);
  return e != NULL;
}

void tcache_take_newest(hp_tcache *tc) {
  hp_spin_lock(&tc->lock);
  tc_entry *e = newest_cached(tc);
  if (e) {
    tcache_unmark(tc, e, false, NULL);
    tcache_drop_lease(e);
  }
  hp_spin_unlock(&tc->lock);
}

/* Which cached entries a drain takes: of `kind` (HUGEPOOL_KIND_NONE: any),
 * until *bytes_left is 0 (NULL: no limit); with `idle`, only those cached at
 * or before cached_by_ms, an entry with no time yet getting now_ms. */
typedef struct {
  hugepool_kind kind;
  size_t *bytes_left;
  bool idle;
  long long now_ms, cached_by_ms;
} drain_rule;

static bool drain_takes(const drain_rule *r, tc_entry *e) {
  if (e->state != CACHED || (r->kind != HUGEPOOL_KIND_NONE && e->b.kind != r->kind)) return false;
  if (!r->idle) return true;
  if (e->since_ms == 0) e->since_ms = r->now_ms; /* freed with no time noted: idle from now */
  return e->since_ms <= r->cached_by_ms;
}

static size_t drain(const drain_rule *r, hp_block *out, size_t max) {
  size_t n = 0;
  for (hp_tcache *tc = tcache_list; tc && n < max; tc = tc->next) {
    hp_spin_lock(&tc->lock);
    for (size_t i = 0; i < ENTRIES && n < max && (!r->bytes_left || *r->bytes_left > 0); i++) {
      tc_entry *e = &tc->e[i];
      if (!drain_takes(r, e)) continue;
      out[n++] = e->b;
      if (r->bytes_left) *r->bytes_left = *r->bytes_left > e->b.size ? *r->bytes_left - e->b.size : 0;
      tcache_unmark(tc, e, false, NULL);
      tcache_drop_lease(e);
    }
    hp_spin_unlock(&tc->lock);
  }
  return n;
}

size_t tcache_drain(hugepool_kind kind, hp_block *out, size_t max, size_t *bytes_left) {
  const drain_rule r = {.kind = kind, .bytes_left = bytes_left};
  return drain(&r, out, max);
}

size_t tcache_drain_idle(long long now_ms, long long cached_by_ms, hp_block *out, size_t max) {
  const drain_rule r = {.kind = HUGEPOOL_KIND_NONE, .idle = true, .now_ms = now_ms, .cached_by_ms = cached_by_ms};
  return drain(&r, out, max);
}

void tcache_totals(size_t *count, size_t *bytes) {
  *count = *bytes = 0;
  for (hp_tcache *tc = tcache_list; tc; tc = tc->next) {
    hp_spin_lock(&tc->lock);
    for (size_t i = 0; i < ENTRIES; i++) {
      if (tc->e[i].state != CACHED) continue;
      (*count)++;
      *bytes += tc->e[i].b.size;
    }
    hp_spin_unlock(&tc->lock);
  }
}

size_t tcache_bytes_of_kind(hugepool_kind kind) {
  size_t bytes = 0;
  for (hp_tcache *tc = tcache_list; tc; tc = tc->next) {
    hp_spin_lock(&tc->lock);
    for (size_t i = 0; i < ENTRIES; i++) {
      if (tc->e[i].state == CACHED && tc->e[i].b.kind == kind) bytes += tc->e[i].b.size;
    }
    hp_spin_unlock(&tc->lock);
  }
  return bytes;
}

void tcache_sum_stats(hugepool_stats *st) {
  uint64_t *to = (uint64_t *)st;
  for (hp_tcache *tc = tcache_list; tc; tc = tc->next) {
    hp_spin_lock(&tc->lock);
    const uint64_t *from = (const uint64_t *)&tc->delta;
    for (size_t i = 0; i < sizeof(*st) / sizeof(uint64_t); i++) to[i] += from[i];
    hp_spin_unlock(&tc->lock);
  }
}

/* Empties a cache: cached blocks go to the shared cache (or, with no
 * victims array, are forgotten: the fork child drains them first), handed-out
 * ones become plain live blocks, leases go back. */
static void return_one(hp_tcache *tc, hp_block *victims, size_t max_victims, size_t *n_victims) {
  for (size_t i = 0; i < ENTRIES; i++) {
    tc_entry *e = &tc->e[i];
    if (e->state == CACHED) {
      hp_block b = e->b;
      tcache_unmark(tc, e, false, NULL);
      if (victims) cache_add_unchecked(&b, victims, max_victims, n_victims);
    } else if (e->state == OUT) {
      hp_block b = e->b;
      tcache_unmark(tc, e, true, &b);
    }
    tcache_drop_lease(e);
  }
}

void tcache_return_all(hp_block *victims, size_t max_victims, size_t *n_victims) {
  for (hp_tcache *tc = tcache_list; tc; tc = tc->next) {
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
  for (hp_tcache *tc = tcache_list; tc; tc = tc->next) hp_spin_lock(&tc->lock);
}

void tcache_unlock_all(void) {
  for (hp_tcache *tc = tcache_list; tc; tc = tc->next) hp_spin_unlock(&tc->lock);
}

void tcache_child_reset(void) {
  for (hp_tcache *tc = tcache_list; tc; tc = tc->next) {
    return_one(tc, NULL, 0, NULL);
    tc->owned = tc == tcache_self_if_any();
  }
}

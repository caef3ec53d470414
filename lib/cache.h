/* SPDX-License-Identifier: BSD-3-Clause */
/* The shared cache of freed blocks (cache.c).  Not installed.  Every
 * function runs under hp_lock, held by the caller, and takes no other lock. */
#ifndef HUGEPOOL_CACHE_H
#define HUGEPOOL_CACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the shared cache of freed blocks (cache.c), caller holds hp_lock ----
 * Constant-time take and eviction.  The limits cover the cached blocks plus
 * the leases the thread caches hold (tcache.c). */
HP_INTERNAL int cache_configure(size_t max_slots, size_t max_bytes);
/* A cached block of `size` or, if none, the smallest of up to max_size. */
HP_INTERNAL bool cache_take(size_t size, size_t max_size, int node, hugepool_kind kind, hp_block *out);
/* Caches `b`, evicting the oldest blocks into victims[] (at most
 * max_victims).  Returns true if `b` was cached; false if it must be
 * released by the caller (also appended to victims[] in that case). */
HP_INTERNAL bool cache_put(const hp_block *b, hp_block *victims, size_t max_victims, size_t *n_victims);
/* Reserves room for one block of `size` for a thread cache, evicting as
 * cache_put does; false (nothing evicted) if there is no such room. */
HP_INTERNAL bool cache_lease(size_t size, hp_block *victims, size_t max_victims, size_t *n_victims);
HP_INTERNAL void cache_unlease(size_t size);
/* Would a lease of `size` fit without evicting, once leases of give_slots
 * blocks and give_bytes bytes were given back? */
HP_INTERNAL bool cache_lease_fits(size_t size, size_t give_slots, size_t give_bytes);
/* Caches `b` ignoring the limits (cache_shrink_to_limits follows). */
HP_INTERNAL void cache_add_unchecked(const hp_block *b, hp_block *victims, size_t max_victims, size_t *n_victims);
/* The block cached last and when it was cached (none: false); the second
 * takes it out. */
HP_INTERNAL bool cache_newest(hp_block *out, long long *since_ms);
HP_INTERNAL void cache_take_newest(void);
/* Evicts the oldest block of `kind`; false if none is cached. */
HP_INTERNAL bool cache_evict_kind(hugepool_kind kind, hp_block *out);
/* Evicts the oldest block if it was cached at or before cached_by_ms (the
 * coarse clock, os_coarse_ms()); false otherwise. */
HP_INTERNAL bool cache_evict_idle(long long cached_by_ms, hp_block *out);
/* Moves up to max_out cached blocks, oldest first, into out[]; returns how many. */
HP_INTERNAL size_t cache_drain(hp_block *out, size_t max_out);
/* Evicts the oldest blocks until the cache and the leases fit the limits. */
HP_INTERNAL size_t cache_shrink_to_limits(hp_block *out, size_t max_out);
HP_INTERNAL size_t cache_count(void);
HP_INTERNAL size_t cache_bytes(void);
HP_INTERNAL size_t cache_bytes_of_kind(hugepool_kind kind);
HP_INTERNAL size_t cache_max_slots(void);
HP_INTERNAL size_t cache_max_bytes(void);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_CACHE_H */

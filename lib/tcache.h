/* SPDX-License-Identifier: BSD-3-Clause */
/* The threads' own caches (tcache.c).  Not installed.  Lock order: hp_lock,
 * then any number of thread-cache locks (only a holder of hp_lock takes more
 * than one), then registry stripes. */
#ifndef HUGEPOOL_TCACHE_H
#define HUGEPOOL_TCACHE_H

#include <stdbool.h>
#include <stddef.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- thread caches (tcache.c) -------------------------------------------
 * Each thread keeps its last few freed blocks under its own lock; a hit, and
 * the free of a block handed out by the hit, touch nothing another thread
 * touches: not the shared cache, not the registry (the block keeps its
 * registry entry, marked, while the thread cache holds it).  The fast paths
 * take no other lock; the functions marked "under hp_lock" need it. */
/* Once, from init; on_thread_exit runs when a thread that used its cache
 * exits (it hands the cache back with tcache_retire). */
HP_INTERNAL void tcache_init(void (*on_thread_exit)(hp_tcache *tc));
/* The calling thread's cache, created (under hp_lock) on first use; NULL if
 * metadata cannot be had.  _if_any: NULL rather than create one. */
HP_INTERNAL hp_tcache *tcache_self(void);
HP_INTERNAL hp_tcache *tcache_self_if_any(void);
/* HUGEPOOL_CACHE_DECAY set (alloc.c): the fast paths note when each block
 * is freed (a coarse clock read); unset, they note nothing. */
HP_INTERNAL void tcache_set_stamping(bool on);
/* Fast paths: counters of the hit or the free go into the thread's cache. */
/* A hit takes the smallest cached block of size .. max_size (hp_fit_max). */
HP_INTERNAL bool tcache_take(hp_tcache *tc, size_t size, size_t max_size, size_t requested, int node,
                             hugepool_kind kind, void **out);
/* The free of a block this cache handed out: 1 (cached again), 2 (it left
 * the cache and its registry entry: *out is to be released, as the process
 * maps more than its share of the pool), 0 (not one of this cache's). */
HP_INTERNAL int tcache_free_own(hp_tcache *tc, const void *addr, hp_block *out);
/* A live block this cache handed out, by address. */
HP_INTERNAL bool tcache_find_own(hp_tcache *tc, const void *addr, hp_block *out);
/* For a marked registry entry (copy): 1 and *out if the block is handed out
 * (live), 0 if cached, -1 if the entry changed since (look again). */
HP_INTERNAL int tcache_lookup(const hp_block *copy, hp_block *out);
/* Takes the handed-out block of a marked registry entry away from its
 * thread cache: *out becomes a plain live block (resizing: its registry
 * entry stays, marked as being resized) or leaves the registry.  0; EINVAL:
 * the block is cached (not live); EAGAIN: the entry changed since. */
HP_INTERNAL int tcache_detach(const hp_block *copy, bool resizing, hp_block *out);
/* Counts the free of plain block `b` and caches it in an entry whose lease
 * fits, if may_cache; false if it was not cached (tcache_put_slow is next). */
HP_INTERNAL bool tcache_put_fast(hp_tcache *tc, const hp_block *b, bool may_cache);
/* Slow free, under hp_lock: takes a lease for `b` (evicting into victims[]
 * as cache_put does, oldest of this thread's own blocks included); false if
 * `b` is not cached here (the caller tries the shared cache). */
HP_INTERNAL bool tcache_put_slow(hp_tcache *tc, const hp_block *b, hp_block *victims, size_t max_victims,
                                 size_t *n_victims);
/* Under hp_lock: the block cached in tc that its thread freed last (false
 * if none) and when (0: not noted, no decay set); the second takes it out of
 * the cache (its registry mark and lease go). */
HP_INTERNAL bool tcache_newest(hp_tcache *tc, hp_block *out, long long *since_ms);
HP_INTERNAL void tcache_take_newest(hp_tcache *tc);
/* Under hp_lock: takes a matching block from any thread's cache. */
HP_INTERNAL bool tcache_steal(size_t size, int node, hugepool_kind kind, hp_block *out);
/* Under hp_lock: moves up to max cached blocks out of every thread cache
 * (of `kind`, or any with HUGEPOOL_KIND_NONE), returning their leases. */
HP_INTERNAL size_t tcache_drain(hugepool_kind kind, hp_block *out, size_t max, size_t *bytes_left);
/* Under hp_lock: moves up to max blocks that were cached at or before
 * cached_by_ms (coarse clock) out of every thread cache, returning their
 * leases; a block with no time yet gets now_ms and stays. */
HP_INTERNAL size_t tcache_drain_idle(long long now_ms, long long cached_by_ms, hp_block *out, size_t max);
/* Under hp_lock: blocks cached by the threads, and of one kind. */
HP_INTERNAL void tcache_totals(size_t *count, size_t *bytes);
HP_INTERNAL size_t tcache_bytes_of_kind(hugepool_kind kind);
/* Under hp_lock: adds every thread cache's counters to *st. */
HP_INTERNAL void tcache_sum_stats(hugepool_stats *st);
/* Under hp_lock: gives every lease back (cached blocks move to the shared
 * cache, unchecked; handed-out ones become plain live blocks) before the
 * limits change. */
HP_INTERNAL void tcache_return_all(hp_block *victims, size_t max_victims, size_t *n_victims);
/* Under hp_lock: the same for one exiting thread's cache, which loses its owner. */
HP_INTERNAL void tcache_retire(hp_tcache *tc, hp_block *victims, size_t max_victims, size_t *n_victims);
/* fork: lock every thread cache (after hp_lock), unlock; in the child, once
 * the cached blocks are drained, every cache is emptied (handed-out blocks
 * become plain live blocks) and those of the threads that did not survive
 * lose their owners. */
HP_INTERNAL void tcache_lock_all(void);
HP_INTERNAL void tcache_unlock_all(void);
HP_INTERNAL void tcache_child_reset(void);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_TCACHE_H */

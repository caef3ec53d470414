/* SPDX-License-Identifier: BSD-3-Clause */
/* Lazy release (release.c): blocks leave the caches, or live blocks leave
 * for good, in batches chosen under hp_lock and unmapped after it is
 * dropped.  Not installed.
 *
 * Rules: a block chosen for release is counted (release_mark) under
 * hp_lock, then unmapped by release_now() without it; release_now() is the
 * one function through which every block goes back to the kernel.  Lock
 * order: takes hp_lock, then (through the caches) thread-cache locks; holds
 * none on return, and release_now() is called with none held. */
#ifndef HUGEPOOL_RELEASE_H
#define HUGEPOOL_RELEASE_H

#include <stddef.h>
#include <stdint.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Lazy release: count blocks as being released under hp_lock, then unmap
 * them with release_now() after dropping it. */
HP_INTERNAL void release_mark(const hp_block *blocks, size_t n);
HP_INTERNAL void release_now(hp_block *blocks, size_t n);
/* The one loop every bulk release runs: under hp_lock, take(batch) picks up
 * to HP_BATCH blocks, *counter counts them; then they are unmapped outside
 * the lock; until take() finds none.  Returns the bytes released. */
HP_INTERNAL size_t release_batches(size_t (*take)(hp_block *out, size_t max, void *arg), void *arg, uint64_t *counter);
/* Releases cached blocks of `kind`, oldest first, until `need` bytes are on
 * their way back to the pool (or none is left); returns the bytes. */
HP_INTERNAL size_t release_for(hugepool_kind kind, size_t need);
/* Releases every cached block, the shared cache's and the threads' (a
 * trim: each block counted in trims); returns the bytes. */
HP_INTERNAL size_t release_cached(void);
/* Releases every cached block (the shared cache's and the threads') cached
 * for decay_ms or more by now_ms (coarse clock, ms), each counted in
 * cache_evictions; returns the bytes. */
HP_INTERNAL size_t release_idle(long long now_ms, long long decay_ms);
/* Waits until other threads' lazy releases have reached the pool. */
HP_INTERNAL void release_wait(void);
/* fork child: releases in flight in the parent never happen here. */
HP_INTERNAL void release_forget_in_flight(void);
/* Bytes chosen for release and not yet back in the pool (other threads'
 * lazy releases included). */
HP_INTERNAL size_t release_in_flight(void);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_RELEASE_H */

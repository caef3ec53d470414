/* SPDX-License-Identifier: BSD-3-Clause */
/* The allocation path (alloc.c): take from the caches or map, free into
 * them (what leaves goes through release.h), and the live blocks realloc.c
 * resizes.  Not installed.
 *
 * Rules: the caller of every function here has started the core (init.h).
 * Lock order: takes hp_lock, then (through the caches) thread-cache and
 * registry locks; holds none on return. */
#ifndef HUGEPOOL_ALLOC_H
#define HUGEPOOL_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the allocation path (alloc.c) ---------------------------------------- */
/* The largest cached block that may serve a request of `size` (a multiple
 * of `page`): a quarter more, in whole pages.  A program whose buffers
 * drift in size (30, 31 ... 36 MB in turn) then reuses the blocks it has
 * instead of keeping one per size (eight blocks of 30-36 MB for two
 * buffers), which a pool shared by several ranks cannot hold: every block
 * over the rank's share was unmapped and mapped again, 1.2-1.5x the time
 * of one reused buffer.  A block taken so is at most 25% larger than asked
 * (counted as slack); an exact fit is always preferred. */
static inline size_t hp_fit_max(size_t size, size_t page) {
  size_t more = (size / 4) & ~(page - 1);
  return size + more < size ? size : size + more;
}

/* A block of at least `bytes` on `node` (HUGEPOOL_ANY_NODE: any), from the
 * caches or mapped (*fresh: new pages, zero), else the policy's fallback;
 * NULL with errno.  (hooks.h declares it for the preload too.) */
HP_INTERNAL void *hp_allocate(size_t bytes, int node, bool *fresh);
/* The free of ptr.  keep: the block may go to a cache (hugepool_free); else
 * it goes back to the pool now (hp_free_to_pool).  quiet: a pointer that is
 * no live buffer is no error (hp_free_if_live).  false: nothing freed.
 * errno is kept. */
HP_INTERNAL bool alloc_free(void *ptr, bool keep, bool quiet);
/* ---- live blocks, for realloc.c (alloc.c) ---------------------------- */
/* A resize begins with live_begin_resize() (live.h). */
typedef enum hp_resize_outcome {
  HP_RESIZE_KEPT,   /* the same pages (requested bytes may differ) */
  HP_RESIZE_GROWN,  /* pages added, none copied */
  HP_RESIZE_SHRUNK, /* pages given back */
  HP_RESIZE_FAILED  /* no change: counted as a failure */
} hp_resize_outcome;
/* Ends a resize begun on `was`: the block is now *now (its address may have
 * moved); statistics follow the change. */
HP_INTERNAL void live_end_resize(const hp_block *was, const hp_block *now, hp_resize_outcome outcome);
/* Releases cached blocks of `kind` until `bytes` are back in the pool (or
 * the cache holds none), and waits for other threads' releases in flight. */
HP_INTERNAL void live_reclaim(uint32_t kind, size_t bytes);
/* Counts a resize done by copying into a new buffer (realloc.c's fallback). */
HP_INTERNAL void live_count_copy(void);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_ALLOC_H */

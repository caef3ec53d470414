/* SPDX-License-Identifier: BSD-3-Clause */
/* The allocation path (alloc.c): take from the caches or map, free into
 * them (what leaves goes through release.h).  Not installed.
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
/* HUGEPOOL_PREFAULT as this process applies it (init.c): how many bytes at
 * the start of each newly mapped hugetlb block are faulted in when it is
 * mapped. */
/* `by_nodes`: the option's default, which is 0 where a first touch may
 * choose between NUMA nodes (decided at the first mapping). */
HP_INTERNAL void alloc_set_prefault(size_t bytes, bool by_nodes);
/* HUGEPOOL_CACHE_DECAY as this process applies it (init.c): cached blocks
 * unused for longer than ms go back at the next slow path; 0: never. */
HP_INTERNAL void alloc_set_decay(long long ms);
/* Gives back the cached blocks unused for the decay or longer (none when no
 * decay is set), at most once a coarse clock tick: at each slow path, a new
 * mapping (alloc.c, a growth in realloc.c) or a free the thread's cache
 * cannot keep. */
HP_INTERNAL void alloc_give_back_idle(void);
/* The free of ptr.  keep: the block may go to a cache (hugepool_free); else
 * it goes back to the pool now (hp_free_to_pool).  quiet: a pointer that is
 * no live buffer is no error (hp_free_if_live).  false: nothing freed.
 * errno is kept. */
HP_INTERNAL bool alloc_free(void *ptr, bool keep, bool quiet);
#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_ALLOC_H */

/* SPDX-License-Identifier: BSD-3-Clause */
/* This process's share of the node's pool (share.c).  Not installed.
 * Lock-free: relaxed atomics, callable with or without hp_lock. */
#ifndef HUGEPOOL_SHARE_H
#define HUGEPOOL_SHARE_H

#include <stdbool.h>
#include <stddef.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the node's pool, shared with other ranks (share.c) -----------------
 * A process's fair share of the pool: pool pages / ranks on the node. */
HP_INTERNAL void share_init(void);
HP_INTERNAL long share_local_ranks(void);
/* Re-reads the pool size (slow path only: one sysfs read). */
HP_INTERNAL void share_refresh(size_t page_size);
/* Hugetlb bytes this process maps (live + cached), kept up to date. */
HP_INTERNAL void share_mapped(size_t page_size, long long delta);
/* May a freed block of this page size be cached? No while this process
 * maps more than its share (a lock-free check: two relaxed loads). */
HP_INTERNAL bool share_may_cache(size_t page_size);
/* Bytes of cache to give back before mapping `size` more. */
HP_INTERNAL size_t share_excess(size_t page_size, size_t size);
/* Slow paths only (at most one pool read every few ms): is the node's free
 * pool of this page size low while other processes hold pages of it?  Then
 * the caller gives back every cached block of that size. */
HP_INTERNAL bool share_pool_low(size_t page_size);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_SHARE_H */

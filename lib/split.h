/* SPDX-License-Identifier: BSD-3-Clause */
/* 2 MB pages of live buffers given back as 4 KB pages (split.c), so that
 * mprotect and madvise at 4 KB granularity work on them as on any malloc'd
 * memory.  Used by the preload's mprotect/madvise (preload/protect.c), by
 * the free and resize paths (alloc.c) and by fork (fork.c).  Not installed. */
#ifndef HUGEPOOL_SPLIT_H
#define HUGEPOOL_SPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Does [addr, addr + len) begin or end inside a live buffer on 2 MB hugetlb
 * pages (or on pages of one that were split already)? */
HP_INTERNAL bool split_touches(const void *addr, size_t len);
/* Splits the 2 MB pages of live 2 MB-page buffers that the range cuts (the
 * page holding its first byte if that is not 2 MB aligned, the page holding
 * its last byte if its end is not), each into 4 KB pages with the same
 * contents and protection at the same address; its hugetlb page goes back
 * to the pool.  1: a page of hugepool's was cut (split now or before); 0:
 * none was (nothing done); -1 with errno: a split failed (nothing changed
 * for that page). */
HP_INTERNAL int split_ends(void *addr, size_t len);
/* A block leaves the registry for good (free): forgets its split pages.
 * true if it had some (it must then be unmapped, never cached). */
HP_INTERNAL bool split_release(const void *addr, size_t size);
/* A resize moved the block from `from` (old_size) to `to` (new_size; the
 * same address when it shrank in place): its split pages follow, those
 * past the new size are forgotten. */
HP_INTERNAL void split_resized(const void *from, size_t old_size, const void *to, size_t new_size);
/* fork child (HUGEPOOL_FORK=copy), registry locked: b has split pages;
 * copies its hugetlb pages privately, page by page (a page that cannot
 * be copied moves to 4 KB pages too).  true if b was such a block. */
HP_INTERNAL bool split_fork_privatize(hp_block *b);
/* 2 MB pages split since the start of the process. */
HP_INTERNAL uint64_t split_count(void);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_SPLIT_H */

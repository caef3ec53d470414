/* SPDX-License-Identifier: BSD-3-Clause */
/* 2 MB pages of live buffers given back as 4 KB pages (split.c), so that
 * mprotect and madvise at 4 KB granularity work on them as on any malloc'd
 * memory.  Used by the preload's mprotect/madvise (preload/protect.c), by
 * the free and resize paths (alloc.c) and by fork (fork.c).  Not installed.
 * What the preload calls (split_touches, split_ends, split_count) is in
 * hooks.h; the rest, for the core, is here.  Lock order: split.c's mutex is
 * taken before any thread-cache or registry lock, never after. */
#ifndef HUGEPOOL_SPLIT_H
#define HUGEPOOL_SPLIT_H

#include <stdbool.h>
#include <stddef.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_SPLIT_H */

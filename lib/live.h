/* SPDX-License-Identifier: BSD-3-Clause */
/* Live blocks (live.c): the one owner of the registry <-> thread-cache
 * handshake.  A block a thread cache handed out keeps a marked entry in the
 * registry that only that cache can interpret, so finding a live block,
 * taking it out (a free) and marking it for a resize ask the registry, then
 * the cache named in the entry, until the answer holds; no other file asks
 * both.  While a block is marked as being resized, a free of it warns and
 * does nothing and another resize is refused, so a resize (realloc.c) or a
 * split of one of its pages (split.c) never acts on a block that another
 * thread frees or moves meanwhile.  Not installed.
 * Lock order: takes a thread cache's lock (tcache.h), then a registry
 * stripe's (registry.h), one at a time; holds none on return. */
#ifndef HUGEPOOL_LIVE_H
#define HUGEPOOL_LIVE_H

#include <stdbool.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A copy of the live block at `addr` (this thread's own handed-out blocks
 * first, without a shared lock); false if it is no live buffer.  errno is
 * kept. */
HP_INTERNAL bool live_find(const void *addr, hp_block *out);
/* Takes the live block at `addr` out of the registry (or out of the thread
 * cache that handed it out) into *out: 0, EINVAL (not live) or EBUSY (being
 * resized: it stays).  errno is kept. */
HP_INTERNAL int live_take(const void *addr, hp_block *out);
/* Marks the live block at `addr` as being resized and copies it to *out.
 * 0, or -1 with errno = EINVAL (not a live buffer) or EBUSY (another thread
 * is resizing it).  A block a thread cache handed out is taken from it
 * first (it becomes a plain live block of the registry). */
HP_INTERNAL int live_begin_resize(const void *addr, hp_block *out);
/* Ends the mark of a block that kept its address: its registry entry
 * becomes *now, no longer marked. */
HP_INTERNAL void live_end_in_place(const hp_block *now);
/* Ends the resize begun on `was`: the registry holds *now, no longer
 * marked, at its address (moved: the old entry goes; a new one that cannot
 * be made is warned about, and the buffer is no longer hugepool's).  The
 * statistics are the caller's (realloc.c). */
HP_INTERNAL void live_end_resize(const hp_block *was, const hp_block *now);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_LIVE_H */

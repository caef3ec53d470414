/* SPDX-License-Identifier: BSD-3-Clause */
/* Live blocks marked as being resized (live.c): while marked, a free of the
 * block warns and does nothing and another resize is refused, so a resize
 * (realloc.c) or a split of one of its pages (split.c) never acts on a
 * block that another thread frees or moves meanwhile.  Not installed.
 * Lock order: takes a thread cache's lock (tcache.h), then a registry
 * stripe's (registry.h); holds none on return. */
#ifndef HUGEPOOL_LIVE_H
#define HUGEPOOL_LIVE_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the live block at `addr` as being resized and copies it to *out.
 * 0, or -1 with errno = EINVAL (not a live buffer) or EBUSY (another thread
 * is resizing it).  A block a thread cache handed out is taken from it
 * first (it becomes a plain live block of the registry). */
HP_INTERNAL int live_begin_resize(const void *addr, hp_block *out);
/* Ends the mark of a block that kept its address: its registry entry
 * becomes *now, no longer marked.  The statistics are the caller's
 * (alloc.h: live_end_resize, for a resize that changed the block). */
HP_INTERNAL void live_end_in_place(const hp_block *now);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_LIVE_H */

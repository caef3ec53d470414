/* SPDX-License-Identifier: BSD-3-Clause */
/* Resizing a live buffer (realloc.c), for hugepool_realloc (api.c): growth
 * without copying, shrinking in place, a copy only where the policy allows a
 * fallback.  Not installed.  The caller has started the core.  Lock order:
 * realloc.c's resize gate first, before hp_lock and every lock below it. */
#ifndef HUGEPOOL_REALLOC_H
#define HUGEPOOL_REALLOC_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* hugepool_realloc(ptr, bytes), as include/hugepool/hugepool.h says. */
HP_INTERNAL void *realloc_resize(void *ptr, size_t bytes);
/* The part of it that keeps ptr's pages: records `bytes` as the block's
 * requested size and returns true; false, with nothing done and errno kept,
 * if ptr is not a plain live block, is being resized, or would change its
 * page count (realloc_resize is the way then).  Takes the block's
 * registry stripe lock alone. */
HP_INTERNAL bool realloc_same_pages(void *ptr, size_t bytes);
/* For the core's atfork handlers (atfork.c): the first waits for the
 * resizes in flight and holds new ones back; the others let them go, in the
 * parent and in the child. */
HP_INTERNAL void realloc_fork_prepare(void);
HP_INTERNAL void realloc_fork_parent(void);
HP_INTERNAL void realloc_fork_child(void);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_REALLOC_H */

/* SPDX-License-Identifier: BSD-3-Clause */
/* The registry of live buffers (registry.c), by start address.  Not
 * installed.  Lock order: its stripe locks come last among the core's (a
 * thread-cache lock may be held while one is taken, never the reverse). */
#ifndef HUGEPOOL_REGISTRY_H
#define HUGEPOOL_REGISTRY_H

#include <stdbool.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- registry of live blocks (registry.c) ------------------------------
 * Every live buffer, by start address.  Each call takes the lock of the
 * address's stripe itself: callers need not (and, for registry_update's fn,
 * must not) hold any other lock of the registry.  A block is in the registry
 * while it is live, and also while a thread cache holds it: such an entry
 * has `tc` set and stays unchanged while its thread hands the block out and
 * takes it back (the entry of the thread cache says which); the other
 * functions below refuse it with EAGAIN, and tcache_detach() turns it into
 * a plain entry or removes it.  Blocks in the shared cache are not here. */
HP_INTERNAL int registry_insert(const hp_block *b); /* 0, or -1 with ENOMEM */
/* Removes a plain live block: 0, EINVAL (not live), EBUSY (resizing; the
 * block stays) or EAGAIN (a thread cache's entry: *out is a copy). */
HP_INTERNAL int registry_remove_idle(const void *addr, hp_block *out);
/* Removes the entry of a resize at addr (live_end_resize): a buffer moved
 * away may share its old address with a new buffer mapped there since. */
HP_INTERNAL bool registry_remove_resized(const void *addr, hp_block *out);
HP_INTERNAL bool registry_find(const void *addr, hp_block *out); /* copies the block */
/* The block holding addr, which may lie inside it: find (registry_find, or
 * a caller's lookup that also asks the thread caches) is asked at addr's
 * 2 MB boundary, then at each one below it, as far as the bytes mapped
 * reach.  true: *out holds addr. */
HP_INTERNAL bool registry_find_holding(const void *addr, bool (*find)(const void *, hp_block *), hp_block *out);
/* Runs fn on the plain live block at addr with its stripe locked (fn may
 * change any field but addr) and returns fn's result; -1 with EINVAL if not
 * live, EAGAIN (fn not run, *copy set) for a thread cache's entry.  This is
 * how a resize marks a block as busy or records its new size. */
HP_INTERNAL int registry_update(const void *addr, int (*fn)(hp_block *b, void *arg), void *arg, hp_block *copy);
/* The thread-cache entry of b (same addr, tc and tc_slot): replaced by *b
 * with tc cleared (keep) or removed.  Called by tcache.c with the thread
 * cache's lock held.  false: no such entry. */
HP_INTERNAL bool registry_detach(const hp_block *b, bool keep);
/* fork: registry_walk visits every live block; hold registry_lock_all(). */
HP_INTERNAL void registry_lock_all(void);
HP_INTERNAL void registry_unlock_all(void);
HP_INTERNAL void registry_walk(void (*fn)(hp_block *b, void *arg), void *arg);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_REGISTRY_H */

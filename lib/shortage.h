/* SPDX-License-Identifier: BSD-3-Clause */
/* An empty pool, detected once and re-checked with backoff (shortage.c).
 * Not installed.  Lock order: none (atomics alone).
 *
 * A request the pool cannot cover costs a failed mmap and two sysfs reads
 * (25-35 us); a program that keeps asking (the preload's fallback serves
 * it from glibc, which reuses its own memory in ~0.1 us) ran 1.3-1.6x
 * slower than plain (sqlite3, make -j2 with an empty pool).  So after such
 * a failure, requests for any node of that size or larger fail at once
 * until a deadline, 1 ms after the first failure, doubling up to 64 ms
 * while the pool stays short; one real attempt at each deadline.  Smaller
 * requests still try: what the pool has may fit them.  Pages this process
 * unmaps end the wait (they are back in the pool); pages that other
 * processes free or that are reserved meanwhile are seen at the next
 * deadline.  Cached blocks still serve the requests they fit (the caches
 * come first); what waits is the eviction of cached blocks of other sizes
 * to make room.  Only where a refusal has somewhere else to go (a fallback
 * policy, or the preload's glibc): a strict caller is refused only by the
 * pool itself (alloc.c asks shortage_known only then). */
#ifndef HUGEPOOL_SHORTAGE_H
#define HUGEPOOL_SHORTAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Is a request of `size` on pages of `page` within the wait of a shortage
 * found before (to be refused at once)? */
HP_INTERNAL bool shortage_known(size_t size, size_t page);
/* A request of `size` was refused by the pool: the wait starts or doubles. */
HP_INTERNAL void shortage_found(size_t size, size_t page);
/* Pages of this size may be back: the next request tries the pool. */
HP_INTERNAL void shortage_over(size_t page);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_SHORTAGE_H */

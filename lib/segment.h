/* SPDX-License-Identifier: BSD-3-Clause */
/* Node-shared segments (segment.c), for hugepool_segment_* (api.c): each
 * function does what include/hugepool/hugepool.h says of its public name.
 * Not installed.  The caller has started the core.  Takes no lock of the
 * core but hp_lock (through release_cached, when the pool is short). */
#ifndef HUGEPOOL_SEGMENT_H
#define HUGEPOOL_SEGMENT_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

HP_INTERNAL int segment_create(size_t bytes, const hugepool_segment_options *opts, hugepool_segment *out);
HP_INTERNAL int segment_map(const hugepool_segment_handle *h, hugepool_segment *out);
HP_INTERNAL int segment_unmap(hugepool_segment *seg);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_SEGMENT_H */

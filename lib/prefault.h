/* SPDX-License-Identifier: BSD-3-Clause */
/* A mapping's pages faulted in by several threads before a registration
 * pins them (prefault.c). */
#ifndef HUGEPOOL_PREFAULT_H
#define HUGEPOOL_PREFAULT_H

#include <stddef.h>

/* Faults in the pages of [addr, addr + size) that are not yet present,
 * writable, from up to 8 threads (one per CPU this thread may run on),
 * when the range is at least 64 MiB; else does nothing.  Present pages and
 * their bytes are left as they are.  Best effort: a failure (an old kernel,
 * no thread) leaves the faults to whoever touches the pages next. */
void hp_prefault_parallel(void *addr, size_t size);

#endif

/* SPDX-License-Identifier: BSD-3-Clause */
/* What the preload (preload/) sees of the core, and all it includes of
 * lib/: the option table and values (and the reader it exports to the MPI
 * entry points, option-reader.h), the OS layer for its own system calls,
 * warnings, and the hooks below.  Not installed.
 *
 * The preload links the core's objects (libhugepool_internal.a) into its shared
 * object: these hooks are hidden, the preload's own contract with the core.
 * Rules: hp_allocate needs the core started (the preload's constructor
 * starts it, hugepool_get_policy, before its heap maps a chunk); the free
 * hooks start it themselves, as hugepool_free does (a free may come first).
 * The hooks take hp_lock and the caches' locks as the public functions do,
 * and hold none on return. */
#ifndef HUGEPOOL_HOOKS_H
#define HUGEPOOL_HOOKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "embed.h"
#include "hugepool/hugepool.h"
#include "init.h"
#include "option-reader.h"
#include "options.h"
#include "os.h"
#include "warn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* hugepool_alloc() for a caller that wants to know whether the pages are
 * new (zeroed by the kernel: *fresh) or reused from a cache. */
HP_INTERNAL void *hp_allocate(size_t bytes, int node, bool *fresh);
/* hugepool_free() that never caches: the pages go back to the pool now (the
 * preload's small heap returns its empty chunks with it). */
HP_INTERNAL void hp_free_to_pool(void *ptr);
/* hugepool_free() of ptr if it is a live buffer (true; errno kept), else
 * nothing (false, no warning): one lookup where hugepool_owns() and then
 * hugepool_free() make two (the preload's free of a 2 MB-aligned pointer). */
HP_INTERNAL bool hp_free_if_live(void *ptr);
/* hugepool_realloc() of ptr when it is a live buffer and `bytes` needs the
 * pages it has (true: ptr stays the buffer, errno kept), else nothing
 * (false, no warning): the step of a buffer grown a little at a time, in
 * one registry visit where hugepool_owns() and hugepool_realloc() make three. */
HP_INTERNAL bool hp_realloc_same_pages(void *ptr, size_t bytes);
/* What the preload tells the core, once: hp_embed() (embed.h, included above). */

/* The node's pool in pages of the current page size: nr_hugepages plus
 * nr_overcommit_hugepages (the most it may grow to), or -1 if it cannot be
 * read; errno kept.  What the preload's HUGEPOOL_HOLD=share measures a new
 * request against (sysfs reads: preload/hold.c keeps the value a while). */
HP_INTERNAL long hp_pool_pages(void);
/* Whether an MPI launcher started this process (launcher.h). */
HP_INTERNAL bool hp_mpi_rank(void);

/* "2 MB hugetlb pages: need N pages, F free of T; as root: echo N > ...
 * (or: hugepool-reserve N)" for a request of `size` bytes: the part of a
 * shortage line that the core's and the preload's messages share. */
HP_INTERNAL void hp_describe_shortage(char *buf, size_t len, size_t size, size_t page, int node);
/* 4 KB granularity inside 2 MB pages (split.c), for the preload's mprotect
 * and madvise (preload/protect.c): see split.h. */
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
/* 2 MB pages split since the start of the process. */
HP_INTERNAL uint64_t split_count(void);

/* Registered buffers for the preload's CUDA entry points (preload/cuda.c),
 * with registrar.c's rules (registrar.h).  The CUDA driver's registrar:
 * its id, or -1 with errno = ENODEV (one line says why). */
HP_INTERNAL int hp_cuda_registrar(void);
/* That registrar added by this process and a context a registration can
 * use (none is created): true.  The wait for every context that may use a
 * portable buffer: 0 or the driver's error (registrar.h). */
HP_INTERNAL bool hp_cuda_context(void);
HP_INTERNAL int hp_cuda_synchronize(void);
/* [p, p + len) inside one live hugepool buffer (anywhere: its start is
 * looked for back from p, one registry probe per 2 MB mapped at most): the
 * buffer's whole mapping registered
 * with id unless it is already, *base its start; 0, or the registrar's
 * errno value.  -1: not a range hugepool owns (nothing done). */
HP_INTERNAL int hp_register_range(const void *p, size_t len, int id, void **base);
/* The buffer registered with id that holds p: true, its start and size. */
HP_INTERNAL bool hp_registered_range(const void *p, int id, void **base, size_t *size);

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_HOOKS_H */

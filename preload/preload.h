/* SPDX-License-Identifier: BSD-3-Clause */
/* Internals of libhugepool_preload.so, shared by its files.  Not installed.
 *
 *   alloc-override.c  the exported malloc-family symbols, nothing else
 *   preload.c         routing by size, shortage policy, statistics, init
 *   small-heap.c      opt-in heap for small requests: jemalloc arenas ...
 *   heap-chunks.c     ... whose extents are carved from hugetlb chunks
 *   dlopen.c          dlopen/dlmopen without RTLD_DEEPBIND
 *   protect.c         mprotect/madvise at 4 KB granularity (lib/split.c)
 *   python.c          CPython's object arenas on the small heap
 *   cuda.c            CUDA host registrations served by the cache (--cuda)
 */
#ifndef HUGEPOOL_PRELOAD_H
#define HUGEPOOL_PRELOAD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HPL_HIDDEN __attribute__((visibility("hidden")))
#define HPL_LIKELY(x) __builtin_expect(!!(x), 1)
#define HPL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define HPL_2M ((uintptr_t)2 << 20)

/* Where hp_libc_complete() says no (lib/libc-floor.h: a glibc older than
 * 2.34) the preload is passive: every entry point hands its call to glibc,
 * and the core is never started.  With HUGEPOOL_VERBOSE set, one line says
 * so (passive.c). */
HPL_HIDDEN void hpl_say_passive(void);

/* glibc's own entry points: exported by libc.so.6, so reaching them needs no
 * dlsym (which may call calloc and recurse into us at start-up). */
extern void *__libc_malloc(size_t size);
extern void __libc_free(void *ptr);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

/* ---- preload.c ---------------------------------------------------------- */
/* Requests of at least this many bytes go to hugepool (after init). */
extern HPL_HIDDEN _Atomic size_t hpl_threshold;
/* Non-zero when small requests go to the small heap. */
extern HPL_HIDDEN atomic_bool hpl_small_heap_on;

HPL_HIDDEN void *hpl_malloc_slow(size_t size);
HPL_HIDDEN void *hpl_calloc(size_t count, size_t size);
HPL_HIDDEN void *hpl_realloc(void *ptr, size_t size);
HPL_HIDDEN void *hpl_memalign(size_t alignment, size_t size);
HPL_HIDDEN void hpl_free_slow(void *ptr);
HPL_HIDDEN size_t hpl_usable_size(void *ptr);
/* The small heap's shortage line (a small request given to glibc, or a
 * CPython arena to CPython's mmap, because the pool is short): said once
 * per process; each caller counts its own fallbacks. */
HPL_HIDDEN void hpl_say_small_shortage(void);

/* ---- dlopen.c ------------------------------------------------------------ */
/* dlopen/dlmopen calls whose RTLD_DEEPBIND was taken off. */
extern HPL_HIDDEN _Atomic uint64_t hpl_deepbind_stripped;

/* ---- small-heap.c (with heap-chunks.c, heap.h) ---------------------------- */
/* Largest request the small heap serves; bigger ones go elsewhere. */
#define HPL_SMALL_MAX ((size_t)256 << 10)
/* Largest alignment it serves (memalign & co.); larger go to glibc. */
#define HPL_SMALL_MAX_ALIGN ((size_t)64 << 10)
HPL_HIDDEN int sh_init(void);
/* NULL when the pool cannot give the heap a chunk (the caller falls back). */
HPL_HIDDEN void *sh_malloc(size_t size, bool zero);
HPL_HIDDEN void *sh_memalign(size_t alignment, size_t size);
/* NULL: not resized, ptr still valid. */
HPL_HIDDEN void *sh_realloc(void *ptr, size_t size);
HPL_HIDDEN void sh_free(void *ptr);
HPL_HIDDEN size_t sh_usable_size(const void *ptr);
HPL_HIDDEN bool sh_owns(const void *ptr);
/* True inside the heap's own hooks: anything allocated there goes to glibc. */
HPL_HIDDEN bool sh_reentered(void);
typedef struct sh_counters {
  uint64_t chunks, chunks_peak, chunks_returned, bytes_in_extents;
} sh_counters;
HPL_HIDDEN void sh_stats(sh_counters *out);

/* ---- python.c ------------------------------------------------------------ */
/* With the small heap on: if the program is CPython, its object arenas come
 * from the small heap from now on.  Called once, from the initialisation. */
HPL_HIDDEN void hpl_python_arenas(void);
/* Arenas served by the small heap and by CPython's own mmap; false when the
 * program is not CPython (or the switch was not made). */
HPL_HIDDEN bool hpl_python_counts(uint64_t *served, uint64_t *fallback);

/* ---- hold.c: HUGEPOOL_HOLD ---------------------------------------------- */
/* Resolves `auto` (strict: the preload runs the strict policy); once, from
 * the initialisation, after the core's. */
HPL_HIDDEN void hpl_hold_init(bool strict);
/* Is a new request of `size` bytes beyond this process's share of the
 * pool (glibc serves it)?  `count`: a new request, counted in the
 * statistics and traced; false: a step of a block glibc already has. */
HPL_HIDDEN bool hpl_beyond_share(size_t size, bool count);
HPL_HIDDEN void hpl_hold_counts(uint64_t *n, uint64_t *bytes);

#endif /* HUGEPOOL_PRELOAD_H */

/* SPDX-License-Identifier: BSD-3-Clause */
/* libhugepool_small_heap.so's two files (not installed):
 *   small-heap.c   jemalloc arenas for small requests, the object's entry
 *                  point, and the glue that keeps its private jemalloc to itself
 *   heap-chunks.c  the arenas' extent hooks: 2 MB hugetlb chunks from hugepool
 * They reach the core only through sh_core (small-heap-bridge.h). */
#ifndef HUGEPOOL_PRELOAD_HEAP_H
#define HUGEPOOL_PRELOAD_HEAP_H

#include <jemalloc/jemalloc.h> /* types and MALLOCX_* only: the functions are the hpje_* copies */
#include <sys/types.h>

#include "preload.h" /* HPL_* macros; small-heap-bridge.h */

/* The core's calls, handed over by the interposer (small-heap.c). */
extern HPL_HIDDEN hp_small_heap_core sh_core;
/* The heap's flags per thread: defined by the interposer (preload.h). */
#define SH_THREAD hugepool_small_heap_thread

/* ---- heap-chunks.c ------------------------------------------------------- */
/* The hooks for every heap arena; NULL if the ownership map cannot be had. */
HPL_HIDDEN extent_hooks_t *hc_init(void);
/* Is ptr inside a live chunk?  Lock-free. */
HPL_HIDDEN bool hc_owns(const void *ptr);
/* True while the pool is short and the heap does not ask it for a chunk
 * (a millisecond after a refusal, and the thread's next 63 requests): a
 * request jemalloc could not serve from its thread cache would go down its
 * slab path only to learn that (1,800 instructions a call, measured), so
 * callers send small requests to glibc meanwhile.  Lock-free; reads the
 * clock only while short, once every 64 requests of a thread. */
HPL_HIDDEN bool hc_short(void);
typedef struct hc_counters {
  uint64_t chunks, chunks_peak, chunks_returned, shortages, bytes_in_extents;
} hc_counters;
HPL_HIDDEN void hc_stats(hc_counters *out);
/* Set (for good) when the heap first holds HC_GROWN_CHUNKS chunks: then
 * small-heap.c starts jemalloc's background thread.  One relaxed load per
 * malloc reads it. */
#define HC_GROWN_CHUNKS 8
extern HPL_HIDDEN atomic_bool hc_grown;

/* ---- small-heap.c: what the private jemalloc calls instead of libc ------- */
HPL_HIDDEN char *hpl_je_secure_getenv(const char *name);
HPL_HIDDEN ssize_t hpl_je_readlink(const char *restrict path, char *restrict buf, size_t len);
HPL_HIDDEN void *hpl_je_dlsym(void *restrict handle, const char *restrict name);
HPL_HIDDEN int hpl_je_unwind_backtrace(void *trace, void *arg);
HPL_HIDDEN uintptr_t hpl_je_unwind_get_ip(void *context);
HPL_HIDDEN double hpl_je_log(double x);
HPL_HIDDEN double hpl_je_exp(double x);
HPL_HIDDEN double hpl_je_round(double x);
HPL_HIDDEN int hpl_je_madvise(void *addr, size_t len, int advice);
HPL_HIDDEN int hpl_je_mprotect(void *addr, size_t len, int prot);

#endif /* HUGEPOOL_PRELOAD_HEAP_H */

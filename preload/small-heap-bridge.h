/* SPDX-License-Identifier: BSD-3-Clause */
/* The small heap (--small-heap, HUGEPOOL_SMALL_HEAP) lives in an object of
 * its own, libhugepool_small_heap.so: small-heap.c, heap-chunks.c and the
 * private jemalloc.  A process that did not ask for it never loads it, so
 * the interposer every command of a job loads stays small (jemalloc's code,
 * relocations and metadata cost every exec 43 µs and 8 page faults:
 * bench/RESULTS.md section 36).
 *
 * The interposer loads it with dlopen from its own directory at start-up
 * (dlopen.c: hpl_small_heap_start), calls its one exported function,
 * hugepool_small_heap_entry, with the core's calls the heap needs (a table,
 * hp_small_heap_core), and gets the heap's calls back (hp_small_heap_ops).
 * Nothing else crosses: the object links nothing of the core and defines
 * no name a program could bind to.
 *
 * Its thread-local data is the interposer's (small-heap-core.c): an object
 * loaded with dlopen gets initial-exec TLS only from glibc's small static
 * reserve, which jemalloc's 2.6 KB of thread data does not fit; so both
 * jemalloc's (cmake/jemalloc-private.cmake makes its tsd_tls an undefined
 * reference to hugepool_small_heap_tsd) and the heap's own flags below are
 * defined in the interposer, which the loader places at start-up.
 * C and C++ (tests/preload/test_heap_direct.cpp).  Not installed. */
#ifndef HUGEPOOL_PRELOAD_SMALL_HEAP_BRIDGE_H
#define HUGEPOOL_PRELOAD_SMALL_HEAP_BRIDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HP_SMALL_HEAP_ENTRY "hugepool_small_heap_entry"
#define HP_SMALL_HEAP_LIB "libhugepool_small_heap.so"
/* Both objects come from one build: the version, and the sizes of the
 * tables and of the thread data each side was built with, must agree, or
 * the heap refuses (another jemalloc would write past the thread data). */
#define HP_SMALL_HEAP_VERSION 2

#ifdef __cplusplus
extern "C" {
#endif

/* The core's calls the heap makes (hooks.h says what each does). */
typedef struct hp_small_heap_core {
  int version;        /* HP_SMALL_HEAP_VERSION */
  size_t core_size;   /* sizeof(hp_small_heap_core) */
  size_t ops_size;    /* sizeof(hp_small_heap_ops) */
  size_t thread_size; /* sizeof(hp_small_heap_thread) */
  size_t tsd_size;    /* of hugepool_small_heap_tsd: jemalloc's thread data */
  /* A 2 MB hugetlb chunk from hugepool (hp_allocate; *fresh: newly mapped,
   * so zero), NULL if the pool cannot give one; and back to the pool. */
  void *(*chunk_alloc)(bool *fresh);
  void (*chunk_free)(void *chunk);
  /* hugepool_kind_of and hugepool_pool_free_pages(HUGEPOOL_ANY_NODE). */
  int (*kind_of)(const void *ptr);
  long (*pool_free_pages)(void);
  /* The OS layer: a sparse anonymous mapping, madvise, mprotect. */
  void *(*map_sparse)(size_t len);
  int (*madvise)(void *addr, size_t len, int advice);
  int (*mprotect)(void *addr, size_t len, int prot);
  void (*warn)(const char *text); /* one hugepool warning line */
} hp_small_heap_core;

typedef struct hp_small_heap_counters {
  uint64_t chunks, chunks_peak, chunks_returned, bytes_in_extents;
} hp_small_heap_counters;

/* The heap's calls (small-heap.c says what each does). */
typedef struct hp_small_heap_ops {
  int version;      /* HP_SMALL_HEAP_VERSION */
  size_t ops_size;  /* sizeof(hp_small_heap_ops) */
  int (*init)(void);
  void *(*malloc)(size_t size, bool zero); /* NULL: the pool is short, the caller falls back */
  void *(*memalign)(size_t alignment, size_t size);
  void *(*realloc)(void *ptr, size_t size); /* NULL: not resized, ptr still valid */
  void (*free)(void *ptr);
  size_t (*usable_size)(const void *ptr);
  bool (*owns)(const void *ptr);
  void (*stats)(hp_small_heap_counters *out);
} hp_small_heap_ops;

/* libhugepool_small_heap.so's one export: NULL if the versions or sizes
 * differ (the caller checks version and ops_size of what it gets too). */
typedef const hp_small_heap_ops *(*hp_small_heap_entry_fn)(const hp_small_heap_core *core);

/* The heap's flags per thread (heap-chunks.c, small-heap.c). */
typedef struct hp_small_heap_thread {
  int in_hook;          /* inside an extent hook: the interposer sends what it allocates to glibc */
  unsigned short_skip;  /* requests left to send to glibc while short */
  int arena_flags;      /* MALLOCX_ARENA of the thread's arena; 0: not bound yet */
} hp_small_heap_thread;

#ifdef __cplusplus
}
#endif

#endif /* HUGEPOOL_PRELOAD_SMALL_HEAP_BRIDGE_H */

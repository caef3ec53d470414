/* SPDX-License-Identifier: BSD-3-Clause */
/* Internals of libhugepool_preload.so, shared by its files.  Not installed.
 *
 *   alloc-override.c  the exported malloc-family symbols, nothing else
 *   preload.c         routing by size, shortage policy, statistics, init
 *   small-heap-core.c the core's calls the small heap gets, its thread data
 *   dlopen.c          dlopen/dlmopen without RTLD_DEEPBIND; loads the small heap
 *   protect.c         mprotect/madvise at 4 KB granularity (lib/split.c)
 *   python.c          CPython's object arenas on the small heap
 *   cuda-bridge.c     the core's calls libhugepool_cuda_preload.so gets
 * Objects of their own, loaded only where asked:
 *   libhugepool_small_heap.so  (small-heap.c, heap-chunks.c, heap.h: the
 *       opt-in heap for small requests, jemalloc arenas on hugetlb chunks;
 *       small-heap-bridge.h)
 *   libhugepool_cuda_preload.so (cuda.c: CUDA host registrations served
 *       by the cache, --cuda; cuda-bridge.h)
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

#include "small-heap-bridge.h"

/* Where hp_libc_complete() says no (lib/libc-floor.h: a glibc older than
 * 2.34), or a sanitizer's malloc serves the process, or an allocator the
 * program links does (HUGEPOOL_OTHER_HEAP, other-heap.c), the preload is
 * passive: every entry point hands its call to the heap behind it, and the
 * core is never started.  With
 * HUGEPOOL_VERBOSE set, one line says why (passive.c). */
typedef enum { HPL_PASSIVE_OLD_GLIBC, HPL_PASSIVE_SANITIZER, HPL_PASSIVE_OTHER_HEAP } hpl_passive_why;
HPL_HIDDEN void hpl_say_passive(hpl_passive_why why, const char *who);
/* Passive (after initialising, if that had not happened yet)? */
HPL_HIDDEN bool hpl_passive(void);
/* Ready and not passive: hugepool may have handed out memory. */
HPL_HIDDEN bool hpl_serving(void);
/* Another allocator's heap comes after ours (`who`, other-heap.c): with
 * HUGEPOOL_VERBOSE, a line says that requests below `threshold` go to it,
 * or that the small heap stays off if it was asked for. */
HPL_HIDDEN void hpl_say_other_heap(const char *who, size_t threshold, bool small_heap_asked);

/* glibc's own entry points: exported by libc.so.6, so reaching them needs no
 * dlsym (which may call calloc and recurse into us at start-up). */
extern void *__libc_malloc(size_t size);
extern void __libc_free(void *ptr);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);

/* ---- other-heap.c: the heap behind the interposer ------------------------ */
/* Whose malloc comes after ours (hpl_find_heap, once, from the
 * initialisation): glibc's; another allocator's (what hugepool does not
 * serve goes there); a sanitizer's (everything goes there: passive). */
typedef enum { HPL_HEAP_GLIBC, HPL_HEAP_OTHER, HPL_HEAP_SANITIZER } hpl_heap_kind;
typedef struct hpl_heap {
  void *(*malloc)(size_t size);
  void (*free)(void *ptr);
  void *(*calloc)(size_t count, size_t size);
  void *(*realloc)(void *ptr, size_t size);
  void *(*memalign)(size_t alignment, size_t size);
  size_t (*usable_size)(void *ptr); /* NULL: glibc's (other-heap.c reads its chunk header) */
} hpl_heap;
/* glibc's __libc_* until hpl_find_heap() finds another heap after ours. */
extern HPL_HIDDEN hpl_heap hpl_next;
/* Set (once) when hpl_next is not glibc's: a block glibc gave before then
 * must still go back to glibc (hpl_early_alloc, hpl_other_free). */
extern HPL_HIDDEN atomic_bool hpl_other_heap;
/* `who`: the object whose malloc it is, for the verbose line. */
HPL_HIDDEN hpl_heap_kind hpl_find_heap(char *who, size_t len);
/* HPL_HEAP_OTHER: every function of hpl_next is that allocator's own (else
 * glibc's or another library's may stand in: hugepool cannot share). */
extern HPL_HIDDEN bool hpl_next_whole;
/* glibc's heap is the one: blocks noted meanwhile are glibc's own, no more
 * are noted; true unless an over-aligned block (inside another) is left,
 * which glibc's free would not take: the fast path must stay off. */
HPL_HIDDEN bool hpl_early_close(void);
/* HPL_HEAP_OTHER: does hugepool serve the large requests beside that heap
 * (HUGEPOOL_OTHER_HEAP; the options are read), or stay out? */
HPL_HIDDEN bool hpl_share_other_heap(const char *who);
/* A block from glibc while the heap behind us is not known yet (the preload
 * starting), noted so that it goes back to glibc; `alignment` > 16: a
 * memalign. */
HPL_HIDDEN void *hpl_early_alloc(size_t size, bool zero, size_t alignment);
/* A block from the heap behind us (glibc's until hpl_find_heap said). */
HPL_HIDDEN void *hpl_next_alloc(size_t size, bool zero, size_t alignment);
/* A block that is not hugepool's nor the small heap's, to whichever heap
 * gave it: freed, its usable size, resized within that heap. */
HPL_HIDDEN void hpl_other_free(void *ptr);
HPL_HIDDEN size_t hpl_other_usable_size(void *ptr);
HPL_HIDDEN void *hpl_other_realloc(void *ptr, size_t size);

/* ---- preload.c ---------------------------------------------------------- */
/* Requests of at least this many bytes go to hugepool (after init). */
extern HPL_HIDDEN _Atomic size_t hpl_threshold;
/* Non-zero when small requests go to the small heap. */
extern HPL_HIDDEN atomic_bool hpl_small_heap_on;
/* Requests below the threshold, and frees of blocks not on a 2 MB boundary,
 * go straight to glibc: set at initialisation where glibc's heap comes
 * after ours and the small heap is off; until then every call takes the
 * slow path, which starts the preload. */
extern HPL_HIDDEN atomic_bool hpl_glibc_direct;

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

/* ---- the small heap (small-heap-bridge.h) ------------------------------- */
/* Largest request the small heap serves; bigger ones go elsewhere. */
#define HPL_SMALL_MAX ((size_t)256 << 10)
/* Largest alignment it serves (memalign & co.); larger go to glibc. */
#define HPL_SMALL_MAX_ALIGN ((size_t)64 << 10)
/* dlopen.c: loads libhugepool_small_heap.so from the interposer's own
 * directory into hpl_sh, starts the heap and sets hpl_small_heap_on; if it
 * cannot, says why (once) and leaves small requests to glibc.  Called from
 * the interposer's constructor only, never from a malloc that started the
 * preload earlier: that may come from inside the dynamic loader or another
 * library's constructor, where a dlopen must not start.  Until then small
 * requests go to glibc (and are freed there: the heap owns only its own
 * chunks). */
HPL_HIDDEN void hpl_small_heap_start(void);
/* The heap's calls, valid once hpl_small_heap_on is set. */
extern HPL_HIDDEN hp_small_heap_ops hpl_sh;
/* The heap's flags per thread (small-heap-core.c). */
extern __thread hp_small_heap_thread hugepool_small_heap_thread __attribute__((tls_model("initial-exec")));
/* small-heap-core.c: the core's calls the heap gets. */
HPL_HIDDEN const hp_small_heap_core *hpl_small_heap_core(void);
/* other-heap.c: the path the loader opened this interposer by, in out;
 * false if it has none or it does not fit in len. */
HPL_HIDDEN bool hpl_own_path(char *out, size_t len);

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

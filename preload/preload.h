/* Internals of libhugepool_preload.so, shared by its files.  Not installed.
 *
 *   alloc-override.c  the exported malloc-family symbols, nothing else
 *   preload.c         routing by size, shortage policy, statistics, init
 *   small-heap.c      opt-in dense heap for small requests on hugetlb pages
 */
#ifndef HUGEPOOL_PRELOAD_H
#define HUGEPOOL_PRELOAD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HPL_HIDDEN __attribute__((visibility("hidden")))
#define HPL_LIKELY(x) __builtin_expect(!!(x), 1)
#define HPL_2M ((uintptr_t)2 << 20)

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

/* ---- small-heap.c ------------------------------------------------------- */
/* Largest request the small heap serves; bigger ones go elsewhere. */
#define HPL_SMALL_MAX ((size_t)256 << 10)
HPL_HIDDEN int sh_init(void);
HPL_HIDDEN void *sh_malloc(size_t size);
HPL_HIDDEN void sh_free(void *ptr);
HPL_HIDDEN size_t sh_usable_size(const void *ptr);
HPL_HIDDEN bool sh_owns(const void *ptr);
HPL_HIDDEN void sh_stats(uint64_t *chunks, uint64_t *bytes_in_use, uint64_t *allocs);

#endif /* HUGEPOOL_PRELOAD_H */

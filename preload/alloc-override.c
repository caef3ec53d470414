/* SPDX-License-Identifier: BSD-3-Clause */
/* The malloc family, exported by libhugepool_preload.so: this file only
 * decides between the glibc fast path and preload.c.  The checks here are
 * two relaxed loads and a mask, so requests below the threshold cost one
 * extra call compared with plain glibc.
 *
 * The list follows what mimalloc and jemalloc override on glibc systems:
 * malloc calloc realloc free reallocarray posix_memalign aligned_alloc
 * memalign valloc pvalloc malloc_usable_size and cfree.  C++ operator
 * new/delete in libstdc++ call malloc/free (and aligned_alloc), so they are
 * covered without a C++ runtime here.  The __libc_* names are glibc's and
 * stay glibc's: we forward to them. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload.h"

#define HPL_EXPORT __attribute__((visibility("default")))

void cfree(void *ptr); /* gone from glibc's headers, still called by old binaries */

static inline bool below_threshold(size_t size) {
  return HPL_LIKELY(size < atomic_load_explicit(&hpl_threshold, memory_order_relaxed)) &&
         HPL_LIKELY(atomic_load_explicit(&hpl_glibc_direct, memory_order_relaxed));
}

/* Every hugepool buffer starts on a 2 MB boundary and every small-heap
 * object is inside a chunk, so anything else is glibc's: no lock, no lookup
 * (once the heap behind us is known to be glibc's, other-heap.c). */
static inline bool surely_glibc(const void *ptr) {
  return HPL_LIKELY(((uintptr_t)ptr & (HPL_2M - 1)) != 0) &&
         HPL_LIKELY(atomic_load_explicit(&hpl_glibc_direct, memory_order_relaxed));
}

HPL_EXPORT void *malloc(size_t size) {
  if (below_threshold(size)) return __libc_malloc(size);
  return hpl_malloc_slow(size);
}

HPL_EXPORT void free(void *ptr) {
  if (surely_glibc(ptr)) {
    __libc_free(ptr);
    return;
  }
  hpl_free_slow(ptr);
}

HPL_EXPORT void cfree(void *ptr) { free(ptr); }

HPL_EXPORT void *calloc(size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return NULL;
  }
  if (below_threshold(bytes)) return __libc_calloc(count, size);
  return hpl_calloc(count, size);
}

HPL_EXPORT void *realloc(void *ptr, size_t size) {
  if (ptr && surely_glibc(ptr) && below_threshold(size)) return __libc_realloc(ptr, size);
  return hpl_realloc(ptr, size);
}

HPL_EXPORT void *reallocarray(void *ptr, size_t count, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(ptr, bytes);
}

static inline bool power_of_two(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

HPL_EXPORT int posix_memalign(void **out, size_t alignment, size_t size) {
  if (!power_of_two(alignment) || alignment % sizeof(void *) != 0) return EINVAL;
  int saved = errno;
  errno = 0;
  void *p = hpl_memalign(alignment, size);
  if (!p) {
    int err = errno ? errno : ENOMEM;
    errno = saved;
    return err;
  }
  *out = p;
  errno = saved;
  return 0;
}

HPL_EXPORT void *aligned_alloc(size_t alignment, size_t size) {
  if (!power_of_two(alignment)) {
    errno = EINVAL;
    return NULL;
  }
  return hpl_memalign(alignment, size);
}

HPL_EXPORT void *memalign(size_t alignment, size_t size) {
  /* glibc rounds a non-power-of-two alignment up; so do we. */
  if (!power_of_two(alignment)) {
    if (alignment > ((size_t)1 << (sizeof(size_t) * 8 - 2))) {
      errno = EINVAL;
      return NULL;
    }
    size_t a = 1;
    while (a < alignment) a <<= 1;
    alignment = a;
  }
  return hpl_memalign(alignment, size);
}

HPL_EXPORT void *valloc(size_t size) { return hpl_memalign((size_t)sysconf(_SC_PAGESIZE), size); }

HPL_EXPORT void *pvalloc(size_t size) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t rounded = (size + page - 1) & ~(page - 1);
  if (rounded < size) {
    errno = ENOMEM;
    return NULL;
  }
  return hpl_memalign(page, rounded ? rounded : page);
}

HPL_EXPORT size_t malloc_usable_size(void *ptr) { return hpl_usable_size(ptr); }

/* SPDX-License-Identifier: BSD-3-Clause */
/* Rule 8 of cuda.c: pinned host allocations served by hugepool's registered
 * buffers under HUGEPOOL_CUDA (--cuda).  cudaMallocHost, cudaHostAlloc,
 * cuMemAllocHost_v2 and cuMemHostAlloc of 1 MiB or more, with flags of
 * PORTABLE and MAPPED (DEVICEMAP) only, get a hugepool buffer registered
 * with the core's CUDA registrar (portable and mapped: what was asked, or
 * more), from the cache when one fits: the first costs the registration of
 * whole 2 MB pages (56 ms a GB against 390 for cuMemHostAlloc on an H200,
 * bench/RESULTS.md), the next none.  cudaFreeHost and cuMemFreeHost of
 * such a buffer wait for the context's work, as the driver's free does
 * before it unpins (a copy still reading the buffer finishes first), and
 * give it back to hugepool's cache, registered.
 *
 * Left to the driver: smaller requests, WRITECOMBINED, a process with no
 * CUDA context yet (the driver's call makes the one the program expects;
 * the next are served), a request hugepool cannot cover, and every free of
 * memory this file did not hand out.  Like the driver's, the memory is not
 * cleared: a buffer from the cache holds what its last owner wrote.
 * A driver function handed out by name (cuGetProcAddress) for cuMemFreeHost
 * is always swapped for ours, so a buffer served here is never given to the
 * driver's free; the allocation functions are swapped where they are the
 * driver's exported ones. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "cuda-preload.h"

#define HOST_ALLOC_MIN ((size_t)1 << 20)
#define SERVED_ALLOC_FLAGS 0x3u /* PORTABLE 1, DEVICEMAP (cudaHostAllocMapped) 2; WRITECOMBINED 4 is the driver's */
#define SERVED_MAX 4096         /* live served buffers; more go to the driver */

static pthread_mutex_t served_lock = PTHREAD_MUTEX_INITIALIZER;
static void *served[SERVED_MAX];
static atomic_size_t n_served;

static bool remember(void *p) {
  pthread_mutex_lock(&served_lock);
  size_t n = atomic_load_explicit(&n_served, memory_order_relaxed);
  bool ok = n < SERVED_MAX;
  if (ok) {
    served[n] = p;
    atomic_store_explicit(&n_served, n + 1, memory_order_relaxed);
  }
  pthread_mutex_unlock(&served_lock);
  return ok;
}

static bool forget(const void *p) {
  if (atomic_load_explicit(&n_served, memory_order_relaxed) == 0) return false; /* nothing served: no lock */
  bool found = false;
  pthread_mutex_lock(&served_lock);
  size_t n = atomic_load_explicit(&n_served, memory_order_relaxed);
  for (size_t i = 0; i < n && !found; i++)
    if (served[i] == p) {
      served[i] = served[n - 1];
      atomic_store_explicit(&n_served, n - 1, memory_order_relaxed);
      found = true;
    }
  pthread_mutex_unlock(&served_lock);
  return found;
}

/* A registered hugepool buffer for the request, or NULL for the driver. */
static void *served_alloc(size_t bytes, unsigned flags) {
  int id;
  if (bytes < HOST_ALLOC_MIN || (flags & ~SERVED_ALLOC_FLAGS) || !hpl_cuda_on() || (id = hpl_cuda_registrar()) < 0)
    return NULL;
  const hp_cuda_bridge *core = hpl_cuda_core();
  if (!core->cuda_context()) return NULL;
  void *p = core->alloc_registered(bytes, id);
  if (p && !remember(p)) {
    core->free(p);
    p = NULL;
  }
  return p;
}

static bool served_free(void *p) {
  if (!p || !forget(p)) return false;
  const hp_cuda_bridge *core = hpl_cuda_core();
  core->cuda_synchronize();
  core->free(p);
  return true;
}

typedef int (*alloc_flags_fn)(void **p, size_t bytes, unsigned flags);
typedef int (*alloc_fn)(void **p, size_t bytes);
typedef int (*free_fn)(void *p);

static int alloc_via(enum next_symbol which, void **p, size_t bytes, unsigned flags, bool has_flags) {
  void *q = p ? served_alloc(bytes, flags) : NULL;
  if (q) {
    *p = q;
    return 0;
  }
  any_fn real = hpl_cuda_next(which);
  if (!real) return CU_NOT_INITIALIZED;
  return has_flags ? ((alloc_flags_fn)real)(p, bytes, flags) : ((alloc_fn)real)(p, bytes);
}

static int free_via(any_fn real, void *p) {
  if (served_free(p)) return 0;
  return real ? ((free_fn)real)(p) : CU_NOT_INITIALIZED;
}

HPL_EXPORT int cudaHostAlloc(void **p, size_t bytes, unsigned flags);
HPL_EXPORT int cudaMallocHost(void **p, size_t bytes);
HPL_EXPORT int cudaFreeHost(void *p);
HPL_EXPORT CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags);
HPL_EXPORT CUresult cuMemAllocHost_v2(void **p, size_t bytes);
HPL_EXPORT CUresult cuMemFreeHost(void *p);

int cudaHostAlloc(void **p, size_t bytes, unsigned flags) {
  return alloc_via(NEXT_cudaHostAlloc, p, bytes, flags, true);
}

int cudaMallocHost(void **p, size_t bytes) { return alloc_via(NEXT_cudaMallocHost, p, bytes, 0, false); }

int cudaFreeHost(void *p) { return free_via(hpl_cuda_next(NEXT_cudaFreeHost), p); }

CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
  return alloc_via(NEXT_cuMemHostAlloc, p, bytes, flags, true);
}

CUresult cuMemAllocHost_v2(void **p, size_t bytes) { return alloc_via(NEXT_cuMemAllocHost_v2, p, bytes, 0, false); }

CUresult cuMemFreeHost(void *p) { return free_via(hpl_cuda_next(NEXT_cuMemFreeHost), p); }

/* The driver's cuMemFreeHost as it hands it out by name, if it is none of
 * its exported symbols. */
static _Atomic(any_fn) hidden_free;

static CUresult hidden_free_wrapper(void *p) { return free_via(atomic_load(&hidden_free), p); }

any_fn hpl_cuda_hostalloc_for(const char *symbol, any_fn real) {
  if (strcmp(symbol, "cuMemFreeHost") == 0) {
    if (real == hpl_cuda_next(NEXT_cuMemFreeHost)) return (any_fn)cuMemFreeHost;
    return hpl_cuda_claims(&hidden_free, real) ? (any_fn)hidden_free_wrapper : NULL;
  }
  if (strcmp(symbol, "cuMemHostAlloc") == 0 && real == hpl_cuda_next(NEXT_cuMemHostAlloc))
    return (any_fn)cuMemHostAlloc;
  if (strcmp(symbol, "cuMemAllocHost") == 0 && real == hpl_cuda_next(NEXT_cuMemAllocHost_v2))
    return (any_fn)cuMemAllocHost_v2;
  return NULL;
}

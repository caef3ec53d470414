/* SPDX-License-Identifier: BSD-3-Clause */
/* Rule 8 of cuda.c: pinned host allocations served by hugepool's registered
 * buffers under HUGEPOOL_CUDA (--cuda).  cudaMallocHost, cudaHostAlloc,
 * cuMemAllocHost_v2 and cuMemHostAlloc of 1 MiB or more, with flags of
 * PORTABLE and MAPPED (DEVICEMAP) only, get a hugepool buffer registered
 * with the core's CUDA registrar (portable and mapped: what was asked, or
 * more), from the cache when one fits: a fresh one costs its registration
 * (56-66 ms a GB on 2 MB pages against 390-565 for cuMemHostAlloc on an
 * H200, bench/RESULTS.md), a cached one none.  cudaFreeHost and
 * cuMemFreeHost of such a buffer wait for every context that may use it
 * (the calling thread's, each active primary context), as the driver's
 * free waits before it unpins, so a copy still reading the buffer finishes
 * first; then the buffer goes back to hugepool's cache, registered.  The
 * first error of those waits is the free's answer, as the driver's is.
 *
 * Left to the driver: smaller requests, WRITECOMBINED, a process with no
 * CUDA context yet (the driver's call makes the one the program expects;
 * the next are served), a request hugepool cannot cover, more than 4096
 * live served buffers, and every free of memory not handed out here.
 * Differences a program could see: the memory is not cleared (a cached
 * buffer holds what its last owner wrote; the driver's pinned memory is
 * not documented as cleared either); cudaHostGetFlags/cuMemHostGetFlags
 * know it as registered memory, not as an allocation; a driver-API call
 * from a thread with no current context is served through an active
 * primary context where the driver would say INVALID_CONTEXT.  A
 * cudaHostRegister of served memory is refused with 712, as the driver
 * refuses it (cuda.c asks hpl_cuda_hostalloc_holds).  The driver's
 * cuMemFreeHost handed out by name (cuGetProcAddress, the runtime's entry
 * points) is swapped for ours, in up to four forms, so a served buffer
 * never reaches the driver's free; the allocation functions are swapped
 * where they are the driver's exported ones.  A forked child keeps the
 * table: its free of a parent's buffer gives it to hugepool's cache with
 * no CUDA call (the registrar refuses a child). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "cuda-preload.h"

#define HOST_ALLOC_MIN ((size_t)1 << 20)
#define SERVED_ALLOC_FLAGS 0x3u /* PORTABLE 1, DEVICEMAP (cudaHostAllocMapped) 2; WRITECOMBINED 4 is the driver's */
#define SERVED_MAX 4096         /* live served buffers; more go to the driver */

typedef struct served_buffer {
  uintptr_t start, end; /* the program's bytes */
} served_buffer;

static pthread_mutex_t served_lock = PTHREAD_MUTEX_INITIALIZER;
static served_buffer served[SERVED_MAX];
static atomic_size_t n_served;

/* A fork taken while another thread holds the lock leaves the child a
 * usable one. */
static void fork_prepare(void) { pthread_mutex_lock(&served_lock); }
static void fork_parent(void) { pthread_mutex_unlock(&served_lock); }
static void fork_child(void) { pthread_mutex_init(&served_lock, NULL); }
static void register_fork_handlers(void) { (void)pthread_atfork(fork_prepare, fork_parent, fork_child); }

static bool remember(void *p, size_t bytes) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, register_fork_handlers);
  pthread_mutex_lock(&served_lock);
  size_t n = atomic_load_explicit(&n_served, memory_order_relaxed);
  bool ok = n < SERVED_MAX;
  if (ok) {
    served[n] = (served_buffer){(uintptr_t)p, (uintptr_t)p + bytes};
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
    if (served[i].start == (uintptr_t)p) {
      served[i] = served[n - 1];
      atomic_store_explicit(&n_served, n - 1, memory_order_relaxed);
      found = true;
    }
  pthread_mutex_unlock(&served_lock);
  return found;
}

bool hpl_cuda_hostalloc_holds(uintptr_t start, uintptr_t end) {
  if (atomic_load_explicit(&n_served, memory_order_relaxed) == 0) return false;
  bool found = false;
  pthread_mutex_lock(&served_lock);
  size_t n = atomic_load_explicit(&n_served, memory_order_relaxed);
  for (size_t i = 0; i < n && !found; i++) found = start < served[i].end && served[i].start < end;
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
  if (p && !remember(p, bytes)) {
    core->free(p);
    p = NULL;
  }
  return p;
}

/* 0 or the driver's error: served here; -1: not handed out here. */
static int served_free(void *p) {
  if (!p || !forget(p)) return -1;
  const hp_cuda_bridge *core = hpl_cuda_core();
  int rc = core->cuda_synchronize();
  core->free(p);
  return rc;
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
  int rc = served_free(p);
  if (rc >= 0) return rc;
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

/* The driver's cuMemFreeHost as it hands it out by name, when it is none of
 * its exported symbols: a wrapper for each of up to four forms seen. */
static _Atomic(any_fn) hidden_free[4];
#define HIDDEN_FREE(i) \
  static CUresult hidden_free_##i(void *p) { return free_via(atomic_load(&hidden_free[i]), p); }
HIDDEN_FREE(0)
HIDDEN_FREE(1)
HIDDEN_FREE(2)
HIDDEN_FREE(3)
static const free_fn hidden_free_wrappers[4] = {hidden_free_0, hidden_free_1, hidden_free_2, hidden_free_3};

static any_fn hidden_free_for(any_fn real) {
  for (size_t i = 0; i < 4; i++)
    if (hpl_cuda_claims(&hidden_free[i], real)) return (any_fn)hidden_free_wrappers[i];
  static atomic_bool said;
  if (!atomic_exchange(&said, true))
    hpl_cuda_core()->warn("--cuda: the driver handed out a fifth form of cuMemFreeHost; it is passed on as it is");
  return NULL;
}

any_fn hpl_cuda_hostalloc_for(const char *symbol, any_fn real) {
  if (strcmp(symbol, "cuMemFreeHost") == 0)
    return real == hpl_cuda_next(NEXT_cuMemFreeHost) ? (any_fn)cuMemFreeHost : hidden_free_for(real);
  if (strcmp(symbol, "cuMemHostAlloc") == 0 && real == hpl_cuda_next(NEXT_cuMemHostAlloc))
    return (any_fn)cuMemHostAlloc;
  if (strcmp(symbol, "cuMemAllocHost") == 0 && real == hpl_cuda_next(NEXT_cuMemAllocHost_v2))
    return (any_fn)cuMemAllocHost_v2;
  return NULL;
}

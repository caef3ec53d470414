/* SPDX-License-Identifier: BSD-3-Clause */
/* A program's own host registrations served by the cache (HUGEPOOL_CUDA=1,
 * hugepool-run --cuda), in an object of its own: libhugepool_cuda_preload.so,
 * which hugepool-run preloads after the interposer only when CUDA is asked
 * for, so that no other program defines a CUDA name.  It reaches the
 * interposer's core through cuda-bridge.h alone.  Exported here:
 * cuMemHostRegister(_v2) and cuMemHostUnregister (libcuda's),
 * cudaHostRegister and cudaHostUnregister (libcudart's), and the calls
 * that hand out driver functions by name: cuGetProcAddress(_v2) (how the
 * CUDA runtime and libraries reach the driver) and the runtime's
 * cudaGetDriverEntryPoint(ByVersion) (how a program reaches it through the
 * runtime).  The copies of rule 6 are in cuda-copies.c.
 *
 * Rules:
 *  1. Off (the default) every call goes to the next definition unchanged
 *     and cuGetProcAddress hands back the driver's own functions: nothing
 *     is loaded, nothing is kept.
 *  2. On, a registration of a range inside one hugepool buffer (the
 *     program's pointer is the buffer's start, or inside a buffer
 *     registered already), with flags 0, PORTABLE and/or DEVICEMAP,
 *     registers the buffer's whole mapping once with the core's CUDA
 *     registrar and records the program's range; the program's unregister
 *     forgets the range and keeps the registration, which the core drops
 *     when the mapping goes back to the kernel.  The next registration of
 *     that buffer makes no driver call.
 *  3. What the driver would refuse is refused the same: a range overlapping
 *     one the program registered and did not unregister is
 *     ALREADY_REGISTERED (712), an unregister of no registered start is
 *     NOT_REGISTERED (713).
 *  4. Anything else (a range hugepool does not own, other flags, no CUDA
 *     context yet) goes to the driver as it is.  More than 16384 ranges
 *     registered at once are refused (OUT_OF_MEMORY, one line).
 *  5. hugepool never creates a CUDA context (registrar-gpu.c).
 *  6. HUGEPOOL_CUDA=all (--cuda=all) also registers the hugepool buffer
 *     that a copy of at least 1 MiB reads or writes on the host, at the
 *     first such copy (cuda-copies.c).
 *  7. A program built with nvcc's default, the runtime linked statically,
 *     calls its runtime's cudaHostRegister inside its own binary: that call
 *     and the driver functions its runtime hands out never reach this
 *     object (the driver's exported ones it calls still do).  Measured on
 *     an H200 (bench/RESULTS.md): link with -cudart shared to have them
 *     served.
 *  8. cudaMallocHost, cudaHostAlloc, cuMemAllocHost_v2 and cuMemHostAlloc
 *     of 1 MiB or more are served by registered hugepool buffers, and their
 *     frees give them back to the cache (cuda-hostalloc.c). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "cuda-preload.h"
#include "hooks.h" /* the HUGEPOOL_CUDA modes; nothing of the core is called */

typedef uint64_t cuuint64_t;
typedef CUresult (*register_fn)(void *p, size_t bytes, unsigned flags);
typedef CUresult (*unregister_fn)(void *p);
typedef CUresult (*gpa_v1_fn)(const char *symbol, void **pfn, int version, cuuint64_t flags);
typedef CUresult (*gpa_v2_fn)(const char *symbol, void **pfn, int version, cuuint64_t flags, int *status);
enum { CU_ALREADY_REGISTERED = 712, CU_NOT_REGISTERED = 713 };
#define SERVED_FLAGS 0x3u /* PORTABLE | DEVICEMAP: what a cached registration has */

#define core hpl_cuda_core

/* ---- the program's registered ranges ------------------------------------ */
#define PROGRAM_RANGES 16384 /* .bss: only the pages used are memory */
#define HP_STR_(x) #x
#define HP_STR(x) HP_STR_(x)
typedef struct program_range {
  const char *start;
  uintptr_t end, buffer; /* buffer: the start of the hugepool buffer it lies in */
} program_range;
static pthread_mutex_t ranges_lock = PTHREAD_MUTEX_INITIALIZER;
static program_range ranges[PROGRAM_RANGES];
static size_t n_ranges;

/* A range whose buffer is no longer registered went with its mapping. */
static bool stale(const program_range *r, int id) {
  void *base;
  size_t size;
  return !core()->registered_range(r->start, id, &base, &size) || (uintptr_t)base != r->buffer;
}

static void drop_range(size_t i) { ranges[i] = ranges[--n_ranges]; }

static bool overlaps_program_range(uintptr_t start, uintptr_t end, int id) {
  for (size_t i = 0; i < n_ranges; i++) {
    if (stale(&ranges[i], id)) {
      drop_range(i--);
      continue;
    }
    if (start < ranges[i].end && (uintptr_t)ranges[i].start < end) return true;
  }
  return false;
}

static int program_range_index(uintptr_t start, int id) {
  for (size_t i = 0; i < n_ranges; i++)
    if ((uintptr_t)ranges[i].start == start) {
      if (!stale(&ranges[i], id)) return (int)i;
      drop_range(i);
      return -1;
    }
  return -1;
}

/* ---- on or off ------------------------------------------------------------ */
static atomic_int cuda_mode = -1; /* -1: not read yet; else HP_CUDA_OFF, _ON, _ALL */
static atomic_int registrar_id;   /* 0: not asked yet; -1: no driver */
static const hp_cuda_bridge *_Atomic bridge;

/* The interposer's core (cuda-bridge.h); only called once hpl_cuda_on() said
 * yes, which it says only when the bridge was found. */
const hp_cuda_bridge *hpl_cuda_core(void) { return atomic_load_explicit(&bridge, memory_order_acquire); }

static const hp_cuda_bridge *find_bridge(void) {
  if (!hp_libc_complete()) return NULL; /* the interposer is passive under this glibc (libc-floor.h) */
  void *sym = hp_dlsym(RTLD_DEFAULT, HP_CUDA_BRIDGE_SYMBOL);
  hp_cuda_bridge_fn get;
  memcpy(&get, &sym, sizeof(get)); /* ISO C: an object pointer to a function pointer by its bytes */
  const hp_cuda_bridge *b = sym ? get() : NULL;
  return b && b->version == HP_CUDA_BRIDGE_VERSION ? b : NULL;
}

bool hpl_cuda_on(void) {
  int mode = atomic_load_explicit(&cuda_mode, memory_order_relaxed);
  if (mode < 0) {
    const hp_cuda_bridge *b = find_bridge(); /* none: preloaded without the interposer, off */
    if (b) atomic_store_explicit(&bridge, b, memory_order_release);
    mode = b ? (int)b->cuda_mode() : HP_CUDA_OFF;
    atomic_store(&cuda_mode, mode);
  }
  return mode != HP_CUDA_OFF;
}

bool hpl_cuda_all(void) {
  return hpl_cuda_on() && atomic_load_explicit(&cuda_mode, memory_order_relaxed) == HP_CUDA_ALL;
}

int hpl_cuda_registrar(void) {
  int id = atomic_load(&registrar_id);
  if (id == 0) {
    id = core()->cuda_registrar();
    atomic_store(&registrar_id, id > 0 ? id : -1);
  }
  return id;
}

static CUresult cu_result(int err) {
  return err == EEXIST ? CU_ALREADY_REGISTERED : err == ENOMEM ? CU_OUT_OF_MEMORY : CU_INVALID_VALUE;
}

/* Records the program's range unless it overlaps one it registered
 * (rule 3); caller holds ranges_lock. */
static long record_range(const char *p, uintptr_t end, uintptr_t buffer, int id) {
  if (overlaps_program_range((uintptr_t)p, end, id)) return CU_ALREADY_REGISTERED;
  if (n_ranges == PROGRAM_RANGES) {
    static atomic_bool said;
    if (!atomic_exchange(&said, true))
      core()->warn("--cuda: the program holds " HP_STR(PROGRAM_RANGES) " host registrations of hugepool buffers; "
                   "more are refused (CUDA_ERROR_OUT_OF_MEMORY)");
    return CU_OUT_OF_MEMORY;
  }
  ranges[n_ranges++] = (program_range){p, end, buffer};
  return CU_OK;
}

/* Rule 2: served, or -1 for the driver (rule 4).  The registration itself
 * (20 ms a GB) runs with no lock of ours held: PyTorch registers a block's
 * chunks from several threads at once. */
static long served_register(void *p, size_t bytes, unsigned flags) {
  int id;
  if (!hpl_cuda_on() || bytes == 0 || (flags & ~SERVED_FLAGS) || (id = hpl_cuda_registrar()) < 0) return -1;
  uintptr_t start = (uintptr_t)p, end = start + bytes;
  if (hpl_cuda_hostalloc_holds(start, end)) return CU_ALREADY_REGISTERED; /* pinned already, as the driver says */
  pthread_mutex_lock(&ranges_lock);
  bool overlaps = overlaps_program_range(start, end, id);
  pthread_mutex_unlock(&ranges_lock);
  if (overlaps) return CU_ALREADY_REGISTERED;
  void *buffer;
  int err = core()->register_range(p, bytes, id, &buffer);
  /* the driver refused the buffer: the program hears it; else the driver decides */
  if (err != 0) return err == EEXIST || err == ENOMEM ? cu_result(err) : -1;
  pthread_mutex_lock(&ranges_lock);
  long rc = record_range(p, end, (uintptr_t)buffer, id);
  pthread_mutex_unlock(&ranges_lock);
  return rc;
}

static long served_unregister(void *p) {
  int id;
  if (!hpl_cuda_on() || (id = atomic_load(&registrar_id)) <= 0) return -1;
  pthread_mutex_lock(&ranges_lock);
  int i = program_range_index((uintptr_t)p, id);
  if (i >= 0) drop_range((size_t)i);
  pthread_mutex_unlock(&ranges_lock);
  if (i >= 0) return CU_OK;
  return core()->registered_range(p, id, &(void *){0}, &(size_t){0}) ? CU_NOT_REGISTERED : -1;
}

/* ---- the next definitions ------------------------------------------------ */
static any_fn to_fn(void *p) {
  any_fn f;
  memcpy(&f, &p, sizeof(f));
  return f;
}

static void *to_ptr(any_fn f) {
  void *p;
  memcpy(&p, &f, sizeof(p));
  return p;
}

static const char *const next_names[NEXT_COUNT] = {
    [NEXT_cuMemHostRegister] = "cuMemHostRegister",
    [NEXT_cuMemHostRegister_v2] = "cuMemHostRegister_v2",
    [NEXT_cuMemHostUnregister] = "cuMemHostUnregister",
    [NEXT_cuGetProcAddress] = "cuGetProcAddress",
    [NEXT_cuGetProcAddress_v2] = "cuGetProcAddress_v2",
    [NEXT_cudaGetDriverEntryPoint] = "cudaGetDriverEntryPoint",
    [NEXT_cudaGetDriverEntryPointByVersion] = "cudaGetDriverEntryPointByVersion",
    [NEXT_cudaGetDriverEntryPoint_ptsz] = "cudaGetDriverEntryPoint_ptsz",
    [NEXT_cudaGetDriverEntryPointByVersion_ptsz] = "cudaGetDriverEntryPointByVersion_ptsz",
    [NEXT_cudaHostRegister] = "cudaHostRegister",
    [NEXT_cudaHostUnregister] = "cudaHostUnregister",
    [NEXT_cudaMemcpy] = "cudaMemcpy",
    [NEXT_cudaMemcpy_ptds] = "cudaMemcpy_ptds",
    [NEXT_cudaMemcpyAsync] = "cudaMemcpyAsync",
    [NEXT_cudaMemcpyAsync_ptsz] = "cudaMemcpyAsync_ptsz",
    [NEXT_cudaMemcpy2D] = "cudaMemcpy2D",
    [NEXT_cudaMemcpy2D_ptds] = "cudaMemcpy2D_ptds",
    [NEXT_cudaMemcpy2DAsync] = "cudaMemcpy2DAsync",
    [NEXT_cudaMemcpy2DAsync_ptsz] = "cudaMemcpy2DAsync_ptsz",
    [NEXT_cuMemcpyHtoD_v2] = "cuMemcpyHtoD_v2",
    [NEXT_cuMemcpyHtoD_v2_ptds] = "cuMemcpyHtoD_v2_ptds",
    [NEXT_cuMemcpyHtoDAsync_v2] = "cuMemcpyHtoDAsync_v2",
    [NEXT_cuMemcpyHtoDAsync_v2_ptsz] = "cuMemcpyHtoDAsync_v2_ptsz",
    [NEXT_cuMemcpyDtoH_v2] = "cuMemcpyDtoH_v2",
    [NEXT_cuMemcpyDtoH_v2_ptds] = "cuMemcpyDtoH_v2_ptds",
    [NEXT_cuMemcpyDtoHAsync_v2] = "cuMemcpyDtoHAsync_v2",
    [NEXT_cuMemcpyDtoHAsync_v2_ptsz] = "cuMemcpyDtoHAsync_v2_ptsz",
    [NEXT_cudaHostAlloc] = "cudaHostAlloc",
    [NEXT_cudaMallocHost] = "cudaMallocHost",
    [NEXT_cudaFreeHost] = "cudaFreeHost",
    [NEXT_cuMemHostAlloc] = "cuMemHostAlloc",
    [NEXT_cuMemAllocHost_v2] = "cuMemAllocHost_v2",
    [NEXT_cuMemFreeHost] = "cuMemFreeHost",
};
static _Atomic(any_fn) next_found[NEXT_COUNT];

/* Found once (dlsym costs more than the copies it would sit in front of). */
any_fn hpl_cuda_next(enum next_symbol which) {
  any_fn f = atomic_load_explicit(&next_found[which], memory_order_relaxed);
  if (!f) {
    f = to_fn(hp_dlsym(RTLD_NEXT, next_names[which])); /* NULL (none yet) is asked again */
    atomic_store_explicit(&next_found[which], f, memory_order_relaxed);
  }
  return f;
}
#define next hpl_cuda_next

/* ---- libcuda's entry points ---------------------------------------------- */
HPL_EXPORT CUresult cuMemHostRegister(void *p, size_t bytes, unsigned flags);
HPL_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytes, unsigned flags);
HPL_EXPORT CUresult cuMemHostUnregister(void *p);
HPL_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
HPL_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags, int *status);
HPL_EXPORT int cudaHostRegister(void *p, size_t bytes, unsigned flags);
HPL_EXPORT int cudaHostUnregister(void *p);

static CUresult register_via(any_fn real, void *p, size_t bytes, unsigned flags) {
  long served = served_register(p, bytes, flags);
  if (served >= 0) return (CUresult)served;
  return real ? ((register_fn)real)(p, bytes, flags) : CU_NOT_INITIALIZED;
}

static CUresult unregister_via(any_fn real, void *p) {
  long served = served_unregister(p);
  if (served >= 0) return (CUresult)served;
  return real ? ((unregister_fn)real)(p) : CU_NOT_INITIALIZED;
}

CUresult cuMemHostRegister(void *p, size_t bytes, unsigned flags) {
  return register_via(next(NEXT_cuMemHostRegister), p, bytes, flags);
}

CUresult cuMemHostRegister_v2(void *p, size_t bytes, unsigned flags) {
  return register_via(next(NEXT_cuMemHostRegister_v2), p, bytes, flags);
}

CUresult cuMemHostUnregister(void *p) { return unregister_via(next(NEXT_cuMemHostUnregister), p); }

/* Functions the driver hands out by name that are none of its exported
 * symbols (a version of its own): one wrapper each, for the first seen. */
static _Atomic(any_fn) hidden_register, hidden_unregister;

static CUresult hidden_register_wrapper(void *p, size_t bytes, unsigned flags) {
  return register_via(atomic_load(&hidden_register), p, bytes, flags);
}

static CUresult hidden_unregister_wrapper(void *p) { return unregister_via(atomic_load(&hidden_unregister), p); }

/* real as the wrapper of the hidden slot: the first function seen there. */
bool hpl_cuda_claims(_Atomic(any_fn) *slot, any_fn real) {
  any_fn none = NULL;
  return atomic_compare_exchange_strong(slot, &none, real) || none == real;
}

/* The wrapper of ours for what the driver handed out for symbol, or NULL. */
static any_fn ours_for(const char *symbol, any_fn real) {
  if (strcmp(symbol, "cuMemHostRegister") == 0) {
    if (real == next(NEXT_cuMemHostRegister_v2)) return (any_fn)cuMemHostRegister_v2;
    if (real == next(NEXT_cuMemHostRegister)) return (any_fn)cuMemHostRegister;
    return hpl_cuda_claims(&hidden_register, real) ? (any_fn)hidden_register_wrapper : NULL;
  }
  if (strcmp(symbol, "cuMemHostUnregister") == 0) {
    if (real == next(NEXT_cuMemHostUnregister)) return (any_fn)cuMemHostUnregister;
    return hpl_cuda_claims(&hidden_unregister, real) ? (any_fn)hidden_unregister_wrapper : NULL;
  }
  if (strcmp(symbol, "cuGetProcAddress") == 0) {
    if (real == next(NEXT_cuGetProcAddress_v2)) return (any_fn)cuGetProcAddress_v2;
    if (real == next(NEXT_cuGetProcAddress)) return (any_fn)cuGetProcAddress;
  }
  return hpl_cuda_hostalloc_for(symbol, real);
}

/* What the driver handed out, swapped for ours (rule 1: on only). */
static void hand_back(const char *symbol, void **pfn) {
  if (!hpl_cuda_on() || !symbol || !*pfn) return;
  any_fn ours = ours_for(symbol, to_fn(*pfn));
  if (ours) *pfn = to_ptr(ours);
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags) {
  any_fn real = next(NEXT_cuGetProcAddress);
  if (!real) return CU_NOT_INITIALIZED;
  CUresult rc = ((gpa_v1_fn)real)(symbol, pfn, version, flags);
  if (rc == CU_OK && pfn) hand_back(symbol, pfn);
  return rc;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags, int *status) {
  any_fn real = next(NEXT_cuGetProcAddress_v2);
  if (!real) return CU_NOT_INITIALIZED;
  CUresult rc = ((gpa_v2_fn)real)(symbol, pfn, version, flags, status);
  if (rc == CU_OK && pfn) hand_back(symbol, pfn);
  return rc;
}

/* The runtime's way to the driver by name: it asks the driver through its
 * own handle of libcuda, where cuGetProcAddress above never sees it, so
 * what it hands the program is swapped here (the driver's numbers for the
 * errors; cudaDriverEntryPointQueryResult as the driver's status). */
typedef int (*entry_fn)(const char *symbol, void **pfn, unsigned long long flags, int *status);
typedef int (*entry_by_version_fn)(const char *symbol, void **pfn, unsigned version, unsigned long long flags,
                                   int *status);
HPL_EXPORT int cudaGetDriverEntryPoint(const char *symbol, void **pfn, unsigned long long flags, int *status);
HPL_EXPORT int cudaGetDriverEntryPoint_ptsz(const char *symbol, void **pfn, unsigned long long flags, int *status);
HPL_EXPORT int cudaGetDriverEntryPointByVersion(const char *symbol, void **pfn, unsigned version,
                                                unsigned long long flags, int *status);
HPL_EXPORT int cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **pfn, unsigned version,
                                                     unsigned long long flags, int *status);

static int entry_point(enum next_symbol which, const char *symbol, void **pfn, unsigned long long flags, int *status) {
  any_fn real = next(which);
  if (!real) return CU_NOT_INITIALIZED; /* cudaErrorInitializationError */
  int rc = ((entry_fn)real)(symbol, pfn, flags, status);
  if (rc == 0 && pfn) hand_back(symbol, pfn);
  return rc;
}

static int entry_point_by_version(enum next_symbol which, const char *symbol, void **pfn, unsigned version,
                                  unsigned long long flags, int *status) {
  any_fn real = next(which);
  if (!real) return CU_NOT_INITIALIZED;
  int rc = ((entry_by_version_fn)real)(symbol, pfn, version, flags, status);
  if (rc == 0 && pfn) hand_back(symbol, pfn);
  return rc;
}

/* A program built with --default-stream per-thread calls the _ptsz forms. */
int cudaGetDriverEntryPoint(const char *symbol, void **pfn, unsigned long long flags, int *status) {
  return entry_point(NEXT_cudaGetDriverEntryPoint, symbol, pfn, flags, status);
}

int cudaGetDriverEntryPoint_ptsz(const char *symbol, void **pfn, unsigned long long flags, int *status) {
  return entry_point(NEXT_cudaGetDriverEntryPoint_ptsz, symbol, pfn, flags, status);
}

int cudaGetDriverEntryPointByVersion(const char *symbol, void **pfn, unsigned version, unsigned long long flags,
                                     int *status) {
  return entry_point_by_version(NEXT_cudaGetDriverEntryPointByVersion, symbol, pfn, version, flags, status);
}

int cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **pfn, unsigned version, unsigned long long flags,
                                          int *status) {
  return entry_point_by_version(NEXT_cudaGetDriverEntryPointByVersion_ptsz, symbol, pfn, version, flags, status);
}

/* ---- libcudart's entry points (cudaError_t uses the driver's numbers for
 * these: cudaErrorHostMemoryAlreadyRegistered 712, NotRegistered 713) ------ */
int cudaHostRegister(void *p, size_t bytes, unsigned flags) {        /* cudaHostRegisterPortable 1, Mapped 2 */
  return register_via(next(NEXT_cudaHostRegister), p, bytes, flags); /* 3: cudaErrorInitializationError */
}

int cudaHostUnregister(void *p) { return unregister_via(next(NEXT_cudaHostUnregister), p); }

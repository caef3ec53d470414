/* SPDX-License-Identifier: BSD-3-Clause */
/* A FAKE CUDA runtime (libcudart.so), for tests/preload/cuda_plumbing.c
 * only (see fake_libcuda.c): like the real runtime it reaches the driver by
 * name, through the cuGetProcAddress_v2 it finds with dlsym on its own
 * handle of libcuda.so.1, so the preload's exported cuMemHostRegister never
 * sees these calls; only its cudaHostRegister can. */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef int (*gpa_fn)(const char *, void **, int, uint64_t, int *);
typedef int (*reg_fn)(void *, size_t, unsigned);
typedef int (*unreg_fn)(void *);
#define API __attribute__((visibility("default")))
API int cudaHostRegister(void *p, size_t len, unsigned flags);
API int cudaHostUnregister(void *p);
API long fake_cudart_calls(void);
API int cudaMemcpy(void *dst, const void *src, size_t n, int kind);
API int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream);
API int cudaHostAlloc(void **p, size_t len, unsigned flags);
API int cudaMallocHost(void **p, size_t len);
API int cudaFreeHost(void *p);
API int cudaMemcpy_ptds(void *dst, const void *src, size_t n, int kind);
API int cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows, int kind);
API int cudaGetDriverEntryPoint(const char *symbol, void **pfn, unsigned long long flags, int *status);
API int cudaGetDriverEntryPointByVersion(const char *symbol, void **pfn, unsigned version, unsigned long long flags,
                                         int *status);

static long calls;

static void *driver_entry(const char *name) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  void *sym = lib ? dlsym(lib, "cuGetProcAddress_v2") : NULL;
  gpa_fn gpa;
  memcpy(&gpa, &sym, sizeof(gpa));
  void *fn = NULL;
  int status = 0;
  if (!gpa || gpa(name, &fn, 13000, 0, &status) != 0) return NULL;
  return fn;
}

int cudaHostRegister(void *p, size_t len, unsigned flags) {
  calls++;
  void *fn = driver_entry("cuMemHostRegister");
  reg_fn reg;
  memcpy(&reg, &fn, sizeof(reg));
  return reg ? reg(p, len, flags) : 3;
}

int cudaHostUnregister(void *p) {
  calls++;
  void *fn = driver_entry("cuMemHostUnregister");
  unreg_fn unreg;
  memcpy(&unreg, &fn, sizeof(unreg));
  return unreg ? unreg(p) : 3;
}

long fake_cudart_calls(void) { return calls; }

/* Copies move nothing here: the plumbing test counts registrations only.
 * Each exported name calls a static function, never another exported name:
 * through the PLT that would be the preload's wrapper, and a test of one
 * wrapper would pass on another's work. */
static int copy_impl(int kind) {
  calls++;
  return kind >= 0 && kind <= 4 ? 0 : 21; /* cudaErrorInvalidMemcpyDirection */
}

int cudaMemcpy(void *dst, const void *src, size_t n, int kind) {
  (void)dst, (void)src, (void)n;
  return copy_impl(kind);
}

int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream) {
  (void)dst, (void)src, (void)n, (void)stream;
  return copy_impl(kind);
}

int cudaMemcpy_ptds(void *dst, const void *src, size_t n, int kind) {
  (void)dst, (void)src, (void)n;
  return copy_impl(kind);
}

int cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows, int kind) {
  (void)dst, (void)dpitch, (void)src, (void)rows;
  return spitch >= width ? copy_impl(kind) : 1;
}

/* As the real runtime: the driver's function for a name, through its own
 * handle (the preload's cuGetProcAddress never sees the request). */
static int entry_impl(const char *symbol, void **pfn, int *status) {
  calls++;
  *pfn = driver_entry(symbol);
  if (status) *status = *pfn ? 0 : 1;
  return *pfn ? 0 : 500; /* cudaErrorSymbolNotFound */
}

int cudaGetDriverEntryPoint(const char *symbol, void **pfn, unsigned long long flags, int *status) {
  (void)flags;
  return entry_impl(symbol, pfn, status);
}

int cudaGetDriverEntryPointByVersion(const char *symbol, void **pfn, unsigned version, unsigned long long flags,
                                     int *status) {
  (void)version, (void)flags;
  return entry_impl(symbol, pfn, status);
}

/* Pinned allocations through the driver's functions by name, as the real
 * runtime reaches them. */
typedef int (*host_alloc_fn)(void **, size_t, unsigned);
typedef int (*host_free_fn)(void *);
static int host_alloc_impl(void **p, size_t len, unsigned flags) {
  calls++;
  void *fn = driver_entry("cuMemHostAlloc");
  host_alloc_fn alloc;
  memcpy(&alloc, &fn, sizeof(alloc));
  return alloc ? alloc(p, len, flags) : 3;
}

int cudaHostAlloc(void **p, size_t len, unsigned flags) { return host_alloc_impl(p, len, flags); }

int cudaMallocHost(void **p, size_t len) { return host_alloc_impl(p, len, 0); }

int cudaFreeHost(void *p) {
  calls++;
  void *fn = driver_entry("cuMemFreeHost");
  host_free_fn release;
  memcpy(&release, &fn, sizeof(release));
  return release ? release(p) : 3;
}

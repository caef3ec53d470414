/* SPDX-License-Identifier: BSD-3-Clause */
/* A FAKE CUDA driver (libcuda.so.1), for tests/preload/cuda_plumbing.c
 * only: it tests the preload's plumbing (which symbols it interposes, what
 * cuGetProcAddress hands back, how many calls reach the driver, the error
 * codes a program sees), never that anything is registered or pinned.
 * That mechanism is proven with real kernel-visible registrars in
 * tests/core/test_registrar.cpp; on a GPU, bench/gpu runs the real driver.
 *
 * It keeps the ranges "registered" in a table and answers as the CUDA
 * driver API documents: a range overlapping a registered one is
 * CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED (712), an unregister of no
 * registered start CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED (713).  One device
 * whose primary context is active and current. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
#define MAX_RANGES 1024
static struct {
  uintptr_t start;
  size_t len;
} ranges[MAX_RANGES];
static int n_ranges;
static long n_register, n_unregister;
static int fake_context;

#define API __attribute__((visibility("default")))
API void fake_cuda_calls(long *reg, long *unreg);
API size_t fake_cuda_registered_length(const void *p);
API void *fake_cuda_internal(const char *symbol);
API CUresult cuInit(unsigned flags);
API CUresult cuCtxGetCurrent(void **ctx);
API CUresult cuDeviceGetCount(int *count);
API CUresult cuDeviceGet(int *dev, int ordinal);
API CUresult cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active);
API CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev);
API CUresult cuDevicePrimaryCtxRelease_v2(int dev);
API CUresult cuCtxPushCurrent_v2(void *ctx);
API CUresult cuCtxPopCurrent_v2(void **ctx);
API CUresult cuMemHostRegister(void *p, size_t len, unsigned flags);
API CUresult cuMemHostRegister_v2(void *p, size_t len, unsigned flags);
API CUresult cuMemHostUnregister(void *p);
API CUresult cuGetErrorName(CUresult err, const char **name);
API CUresult cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t n);
API CUresult cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n);
API CUresult cuMemcpyHtoD_v2_ptds(uint64_t dst, const void *src, size_t n);
API CUresult cuCtxSynchronize(void);
API CUresult cuMemHostAlloc(void **p, size_t len, unsigned flags);
API CUresult cuMemAllocHost_v2(void **p, size_t len);
API CUresult cuMemFreeHost(void *p);
API void fake_cuda_host_calls(long *alloc, long *free, long *sync);
API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags);
API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status);

void fake_cuda_calls(long *reg, long *unreg) {
  *reg = n_register;
  *unreg = n_unregister;
}

size_t fake_cuda_registered_length(const void *p) {
  for (int i = 0; i < n_ranges; i++)
    if (ranges[i].start == (uintptr_t)p) return ranges[i].len;
  return 0;
}

CUresult cuInit(unsigned flags) { return flags == 0 ? 0 : 1; }
CUresult cuCtxGetCurrent(void **ctx) {
  *ctx = &fake_context;
  return 0;
}
CUresult cuDeviceGetCount(int *count) {
  *count = 1;
  return 0;
}
CUresult cuDeviceGet(int *dev, int ordinal) {
  *dev = ordinal;
  return ordinal == 0 ? 0 : 101;
}
CUresult cuDevicePrimaryCtxGetState(int dev, unsigned *flags, int *active) {
  (void)dev;
  *flags = 0;
  *active = 1;
  return 0;
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
  (void)dev;
  *ctx = &fake_context;
  return 0;
}
CUresult cuDevicePrimaryCtxRelease_v2(int dev) { return dev == 0 ? 0 : 101; }
CUresult cuCtxPushCurrent_v2(void *ctx) { return ctx == &fake_context ? 0 : 201; }
CUresult cuCtxPopCurrent_v2(void **ctx) {
  *ctx = &fake_context;
  return 0;
}

/* The driver's own entry points, as cuGetProcAddress hands them out: not
 * the exported symbols (which a preload interposes). */
static CUresult register_impl(void *p, size_t len, unsigned flags) {
  (void)flags;
  uintptr_t s = (uintptr_t)p;
  if (!p || len == 0) return 1;
  for (int i = 0; i < n_ranges; i++)
    if (s < ranges[i].start + ranges[i].len && ranges[i].start < s + len) return 712;
  if (n_ranges == MAX_RANGES) return 2;
  ranges[n_ranges].start = s;
  ranges[n_ranges++].len = len;
  n_register++;
  return 0;
}
CUresult cuMemHostRegister_v2(void *p, size_t len, unsigned flags) { return register_impl(p, len, flags); }
CUresult cuMemHostRegister(void *p, size_t len, unsigned flags) { return register_impl(p, len, flags); }

static CUresult unregister_impl(void *p) {
  for (int i = 0; i < n_ranges; i++)
    if (ranges[i].start == (uintptr_t)p) {
      ranges[i] = ranges[--n_ranges];
      n_unregister++;
      return 0;
    }
  return 713;
}
CUresult cuMemHostUnregister(void *p) { return unregister_impl(p); }

CUresult cuGetErrorName(CUresult err, const char **name) {
  *name = err == 712 ? "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED" : "CUDA_ERROR_FAKE";
  return 0;
}

/* Pinned allocations: plain heap memory here (nothing is pinned), counted. */
static long n_host_alloc, n_host_free, n_sync;
void fake_cuda_host_calls(long *alloc, long *free_, long *sync) {
  *alloc = n_host_alloc;
  *free_ = n_host_free;
  *sync = n_sync;
}
CUresult cuCtxSynchronize(void) {
  n_sync++;
  return 0;
}
static CUresult host_alloc_impl(void **p, size_t len, unsigned flags) {
  if (!p || len == 0 || flags > 7) return 1;
  *p = malloc(len);
  if (!*p) return 2;
  n_host_alloc++;
  return 0;
}
static CUresult host_free_impl(void *p) {
  if (!p) return 1;
  free(p);
  n_host_free++;
  return 0;
}
CUresult cuMemHostAlloc(void **p, size_t len, unsigned flags) { return host_alloc_impl(p, len, flags); }
CUresult cuMemAllocHost_v2(void **p, size_t len) { return host_alloc_impl(p, len, 0); }
CUresult cuMemFreeHost(void *p) { return host_free_impl(p); }

/* By name, as the real driver: version 12000 and later get _v2 where one exists. */
static void *by_name(const char *symbol) {
  if (strcmp(symbol, "cuMemHostRegister") == 0) return (void *)(uintptr_t)&register_impl;
  if (strcmp(symbol, "cuMemHostUnregister") == 0) return (void *)(uintptr_t)&unregister_impl;
  if (strcmp(symbol, "cuGetProcAddress") == 0) return (void *)(uintptr_t)&cuGetProcAddress_v2;
  if (strcmp(symbol, "cuInit") == 0) return (void *)(uintptr_t)&cuInit;
  if (strcmp(symbol, "cuMemHostAlloc") == 0) return (void *)(uintptr_t)&host_alloc_impl;
  if (strcmp(symbol, "cuMemFreeHost") == 0) return (void *)(uintptr_t)&host_free_impl;
  return NULL;
}

void *fake_cuda_internal(const char *symbol) { return by_name(symbol); }

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags) {
  (void)version, (void)flags;
  *pfn = by_name(symbol);
  return *pfn ? 0 : 500;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status) {
  CUresult rc = cuGetProcAddress(symbol, pfn, version, flags);
  if (status) *status = rc == 0 ? 0 : 1;
  return rc;
}

/* Copies move nothing here: the plumbing test counts registrations only. */
static CUresult copy_impl(uint64_t dst, const void *src, size_t n) { return dst && src && n ? 0 : 1; }
CUresult cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t n) { return copy_impl(dst, src, n); }
CUresult cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n) { return dst && src && n ? 0 : 1; }
CUresult cuMemcpyHtoD_v2_ptds(uint64_t dst, const void *src, size_t n) { return copy_impl(dst, src, n); }

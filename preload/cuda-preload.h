/* SPDX-License-Identifier: BSD-3-Clause */
/* Inside libhugepool_cuda_preload.so: what cuda.c (registrations and the
 * entry points handed out by name) and cuda-copies.c (rule 6: buffers
 * registered at their first copy) share.  Hidden: the object exports only
 * what cuda-exports.map lists. */
#ifndef HUGEPOOL_CUDA_PRELOAD_H
#define HUGEPOOL_CUDA_PRELOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda-bridge.h"

#define HPL_EXPORT __attribute__((visibility("default")))
#define HPL_HIDDEN __attribute__((visibility("hidden")))

typedef int CUresult;
enum { CU_OK = 0, CU_INVALID_VALUE = 1, CU_OUT_OF_MEMORY = 2, CU_NOT_INITIALIZED = 3 };

/* A function pointer of no particular type: dlsym and the driver give
 * object pointers, which ISO C converts only through their bytes. */
typedef void (*any_fn)(void);

/* The next definition of each name the object exports. */
enum next_symbol {
  NEXT_cuMemHostRegister,
  NEXT_cuMemHostRegister_v2,
  NEXT_cuMemHostUnregister,
  NEXT_cuGetProcAddress,
  NEXT_cuGetProcAddress_v2,
  NEXT_cudaGetDriverEntryPoint,
  NEXT_cudaGetDriverEntryPointByVersion,
  NEXT_cudaGetDriverEntryPoint_ptsz,
  NEXT_cudaGetDriverEntryPointByVersion_ptsz,
  NEXT_cudaHostRegister,
  NEXT_cudaHostUnregister,
  NEXT_cudaMemcpy,
  NEXT_cudaMemcpy_ptds,
  NEXT_cudaMemcpyAsync,
  NEXT_cudaMemcpyAsync_ptsz,
  NEXT_cudaMemcpy2D,
  NEXT_cudaMemcpy2D_ptds,
  NEXT_cudaMemcpy2DAsync,
  NEXT_cudaMemcpy2DAsync_ptsz,
  NEXT_cuMemcpyHtoD_v2,
  NEXT_cuMemcpyHtoD_v2_ptds,
  NEXT_cuMemcpyHtoDAsync_v2,
  NEXT_cuMemcpyHtoDAsync_v2_ptsz,
  NEXT_cuMemcpyDtoH_v2,
  NEXT_cuMemcpyDtoH_v2_ptds,
  NEXT_cuMemcpyDtoHAsync_v2,
  NEXT_cuMemcpyDtoHAsync_v2_ptsz,
  NEXT_cudaHostAlloc,
  NEXT_cudaMallocHost,
  NEXT_cudaFreeHost,
  NEXT_cuMemHostAlloc,
  NEXT_cuMemAllocHost_v2,
  NEXT_cuMemFreeHost,
  NEXT_COUNT
};

/* The next definition of a name (found once; NULL while there is none). */
HPL_HIDDEN any_fn hpl_cuda_next(enum next_symbol which);
/* --cuda or --cuda=all in effect (and the interposer's core found). */
HPL_HIDDEN bool hpl_cuda_on(void);
/* --cuda=all in effect. */
HPL_HIDDEN bool hpl_cuda_all(void);
/* The core's CUDA registrar id, or -1 where there is no driver or device. */
HPL_HIDDEN int hpl_cuda_registrar(void);
/* The interposer's core; only called once hpl_cuda_on() said yes. */
HPL_HIDDEN const hp_cuda_bridge *hpl_cuda_core(void);
/* real as the function behind a wrapper of ours (slot: the first seen). */
HPL_HIDDEN bool hpl_cuda_claims(_Atomic(any_fn) *slot, any_fn real);
/* The wrapper of cuda-hostalloc.c for what the driver handed out for
 * symbol, or NULL (cuda.c's cuGetProcAddress asks). */
HPL_HIDDEN any_fn hpl_cuda_hostalloc_for(const char *symbol, any_fn real);
/* [start, end) overlaps a buffer cuda-hostalloc.c handed out. */
HPL_HIDDEN bool hpl_cuda_hostalloc_holds(uintptr_t start, uintptr_t end);

#endif

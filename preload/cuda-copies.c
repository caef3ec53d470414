/* SPDX-License-Identifier: BSD-3-Clause */
/* Rule 6 of cuda.c: under HUGEPOOL_CUDA=all (--cuda=all), the hugepool
 * buffer that a copy of at least 1 MiB between the host and a device reads
 * or writes on the host is registered, whole and once, at the first such
 * copy, if the program has a CUDA context: its copies then run at the
 * registered rate (55 GB/s against 9 on an H200, bench/RESULTS.md).
 *
 * The copies: the runtime's cudaMemcpy, cudaMemcpyAsync, cudaMemcpy2D and
 * cudaMemcpy2DAsync, each also in the form a program built with
 * --default-stream per-thread calls (_ptds, _ptsz), and the driver's
 * cuMemcpyHtoD/DtoH(Async)_v2 with theirs.  A 2D copy's host side is
 * pitch * (rows - 1) + width bytes.  Anything else goes on unchanged: the
 * copy itself is always the next definition's, with the program's
 * arguments. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>

#include "cuda-preload.h"

#define COPY_MIN ((size_t)1 << 20)
enum { RT_H2D = 1, RT_D2H = 2, RT_DEFAULT = 4 }; /* cudaMemcpyKind */
typedef int (*rt_copy_fn)(void *dst, const void *src, size_t n, int kind);
typedef int (*rt_copy_async_fn)(void *dst, const void *src, size_t n, int kind, void *stream);
typedef int (*rt_copy_2d_fn)(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows,
                             int kind);
typedef int (*rt_copy_2d_async_fn)(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows,
                                   int kind, void *stream);
typedef CUresult (*htod_fn)(uint64_t dst, const void *src, size_t n);
typedef CUresult (*htod_async_fn)(uint64_t dst, const void *src, size_t n, void *stream);
typedef CUresult (*dtoh_fn)(void *dst, uint64_t src, size_t n);
typedef CUresult (*dtoh_async_fn)(void *dst, uint64_t src, size_t n, void *stream);

/* The hugepool buffer holding host, registered unless it is already. */
static void register_for_copy(const void *host, size_t n) {
  void *buffer;
  int id;
  if (n < COPY_MIN || !hpl_cuda_all() || (id = hpl_cuda_registrar()) < 0) return;
  const hp_cuda_bridge *core = hpl_cuda_core();
  if (!core->registered_range(host, id, &buffer, &(size_t){0})) (void)core->register_range(host, n, id, &buffer);
}

/* A runtime copy's host side or sides (dst_n, src_n: the bytes each spans). */
static void runtime_copy(void *dst, size_t dst_n, const void *src, size_t src_n, int kind) {
  if (kind == RT_H2D || kind == RT_DEFAULT) register_for_copy(src, src_n);
  if (kind == RT_D2H || kind == RT_DEFAULT) register_for_copy(dst, dst_n);
}

/* The host bytes a 2D copy spans on one side (0 where none or overflowing). */
static size_t span_2d(size_t pitch, size_t width, size_t rows) {
  if (rows == 0 || width == 0) return 0;
  if (pitch < width) return 0; /* the runtime refuses it: nothing to register */
  if (rows - 1 > (SIZE_MAX - width) / pitch) return 0;
  return pitch * (rows - 1) + width;
}

#define NEXT_OR_FAIL(which)           \
  any_fn real = hpl_cuda_next(which); \
  if (!real) return 3; /* NOT_INITIALIZED (3 in both APIs) */

/* ---- the runtime's copies ------------------------------------------------ */
#define RT_COPY(name)                                                  \
  HPL_EXPORT int name(void *dst, const void *src, size_t n, int kind); \
  int name(void *dst, const void *src, size_t n, int kind) {           \
    runtime_copy(dst, n, src, n, kind);                                \
    NEXT_OR_FAIL(NEXT_##name)                                          \
    return ((rt_copy_fn)real)(dst, src, n, kind);                      \
  }
#define RT_COPY_ASYNC(name)                                                     \
  HPL_EXPORT int name(void *dst, const void *src, size_t n, int kind, void *s); \
  int name(void *dst, const void *src, size_t n, int kind, void *s) {           \
    runtime_copy(dst, n, src, n, kind);                                         \
    NEXT_OR_FAIL(NEXT_##name)                                                   \
    return ((rt_copy_async_fn)real)(dst, src, n, kind, s);                      \
  }
#define RT_COPY_2D(name)                                                                               \
  HPL_EXPORT int name(void *dst, size_t dp, const void *src, size_t sp, size_t w, size_t h, int kind); \
  int name(void *dst, size_t dp, const void *src, size_t sp, size_t w, size_t h, int kind) {           \
    runtime_copy(dst, span_2d(dp, w, h), src, span_2d(sp, w, h), kind);                                \
    NEXT_OR_FAIL(NEXT_##name)                                                                          \
    return ((rt_copy_2d_fn)real)(dst, dp, src, sp, w, h, kind);                                        \
  }
#define RT_COPY_2D_ASYNC(name)                                                                                  \
  HPL_EXPORT int name(void *dst, size_t dp, const void *src, size_t sp, size_t w, size_t h, int kind, void *s); \
  int name(void *dst, size_t dp, const void *src, size_t sp, size_t w, size_t h, int kind, void *s) {           \
    runtime_copy(dst, span_2d(dp, w, h), src, span_2d(sp, w, h), kind);                                         \
    NEXT_OR_FAIL(NEXT_##name)                                                                                   \
    return ((rt_copy_2d_async_fn)real)(dst, dp, src, sp, w, h, kind, s);                                        \
  }
RT_COPY(cudaMemcpy)
RT_COPY(cudaMemcpy_ptds)
RT_COPY_ASYNC(cudaMemcpyAsync)
RT_COPY_ASYNC(cudaMemcpyAsync_ptsz)
RT_COPY_2D(cudaMemcpy2D)
RT_COPY_2D(cudaMemcpy2D_ptds)
RT_COPY_2D_ASYNC(cudaMemcpy2DAsync)
RT_COPY_2D_ASYNC(cudaMemcpy2DAsync_ptsz)

/* ---- the driver's copies ------------------------------------------------- */
#define HTOD(name)                                                   \
  HPL_EXPORT CUresult name(uint64_t dst, const void *src, size_t n); \
  CUresult name(uint64_t dst, const void *src, size_t n) {           \
    register_for_copy(src, n);                                       \
    NEXT_OR_FAIL(NEXT_##name)                                        \
    return ((htod_fn)real)(dst, src, n);                             \
  }
#define HTOD_ASYNC(name)                                                      \
  HPL_EXPORT CUresult name(uint64_t dst, const void *src, size_t n, void *s); \
  CUresult name(uint64_t dst, const void *src, size_t n, void *s) {           \
    register_for_copy(src, n);                                                \
    NEXT_OR_FAIL(NEXT_##name)                                                 \
    return ((htod_async_fn)real)(dst, src, n, s);                             \
  }
#define DTOH(name)                                             \
  HPL_EXPORT CUresult name(void *dst, uint64_t src, size_t n); \
  CUresult name(void *dst, uint64_t src, size_t n) {           \
    register_for_copy(dst, n);                                 \
    NEXT_OR_FAIL(NEXT_##name)                                  \
    return ((dtoh_fn)real)(dst, src, n);                       \
  }
#define DTOH_ASYNC(name)                                                \
  HPL_EXPORT CUresult name(void *dst, uint64_t src, size_t n, void *s); \
  CUresult name(void *dst, uint64_t src, size_t n, void *s) {           \
    register_for_copy(dst, n);                                          \
    NEXT_OR_FAIL(NEXT_##name)                                           \
    return ((dtoh_async_fn)real)(dst, src, n, s);                       \
  }
HTOD(cuMemcpyHtoD_v2)
HTOD(cuMemcpyHtoD_v2_ptds)
HTOD_ASYNC(cuMemcpyHtoDAsync_v2)
HTOD_ASYNC(cuMemcpyHtoDAsync_v2_ptsz)
DTOH(cuMemcpyDtoH_v2)
DTOH(cuMemcpyDtoH_v2_ptds)
DTOH_ASYNC(cuMemcpyDtoHAsync_v2)
DTOH_ASYNC(cuMemcpyDtoHAsync_v2_ptsz)

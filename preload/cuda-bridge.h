/* SPDX-License-Identifier: BSD-3-Clause */
/* What libhugepool_cuda_preload.so (cuda.c, loaded only with --cuda or
 * HUGEPOOL_CUDA) reaches of the interposer's core: one exported function of
 * libhugepool_preload.so (cuda-bridge.c) hands it this table, found with
 * dlsym at its first CUDA call.  Without the interposer (the object
 * preloaded alone) there is no table, and every CUDA call goes to the
 * driver unchanged.  A program that never asked for --cuda loads neither
 * this object nor any CUDA name.  Not installed. */
#ifndef HUGEPOOL_CUDA_BRIDGE_H
#define HUGEPOOL_CUDA_BRIDGE_H

#include <stdbool.h>
#include <stddef.h>

#define HP_CUDA_BRIDGE_SYMBOL "hugepool_preload_cuda_bridge"
#define HP_CUDA_BRIDGE_VERSION 2

typedef struct hp_cuda_bridge {
  int version;                  /* HP_CUDA_BRIDGE_VERSION */
  long long (*cuda_mode)(void); /* HUGEPOOL_CUDA: HP_CUDA_OFF, _ON or _ALL */
  int (*cuda_registrar)(void);  /* hooks.h hp_cuda_registrar */
  int (*register_range)(const void *p, size_t len, int id, void **base);
  bool (*registered_range)(const void *p, int id, void **base, size_t *size);
  void (*warn)(const char *text); /* one hugepool warning line */
  /* cudaHostAlloc served (cuda-hostalloc.c): a context a registration can
   * use; a buffer registered with id (hugepool_alloc_registered); its free
   * (hugepool_free); a wait for the contexts' work: 0 or the driver's error. */
  bool (*cuda_context)(void);
  void *(*alloc_registered)(size_t bytes, int id);
  void (*free)(void *p);
  int (*cuda_synchronize)(void);
} hp_cuda_bridge;

typedef const hp_cuda_bridge *(*hp_cuda_bridge_fn)(void);

#endif /* HUGEPOOL_CUDA_BRIDGE_H */

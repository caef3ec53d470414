/* SPDX-License-Identifier: BSD-3-Clause */
/* The interposer's side of the CUDA bridge (cuda-bridge.h): the one name
 * libhugepool_preload.so exports for libhugepool_cuda_preload.so. */
#include "cuda-bridge.h"

#include "hooks.h"
#include "hugepool/hugepool.h"
#include "preload.h"

static long long cuda_mode(void) {
  (void)hugepool_get_policy(); /* the core's options are read */
  return option_get(HP_OPT_CUDA);
}

static void warn_text(const char *text) { hp_warn("%s", text); }

static const hp_cuda_bridge bridge = {
    .version = HP_CUDA_BRIDGE_VERSION,
    .cuda_mode = cuda_mode,
    .cuda_registrar = hp_cuda_registrar,
    .register_range = hp_register_range,
    .registered_range = hp_registered_range,
    .warn = warn_text,
    .cuda_context = hp_cuda_context,
    .alloc_registered = hugepool_alloc_registered,
    .free = hugepool_free,
    .cuda_synchronize = hp_cuda_synchronize,
};

__attribute__((visibility("default"))) const hp_cuda_bridge *hugepool_preload_cuda_bridge(void);
/* None while the interposer is passive (preload.h): --cuda stays off. */
const hp_cuda_bridge *hugepool_preload_cuda_bridge(void) { return hpl_passive() ? NULL : &bridge; }

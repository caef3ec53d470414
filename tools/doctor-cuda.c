/* SPDX-License-Identifier: BSD-3-Clause */
/* The doctor's GPU check, only when HUGEPOOL_CUDA asks for GPU registration:
 * is there a driver (libcuda.so.1), does it find a device, and does the
 * process preload the CUDA interposer after hugepool's (hugepool-run --cuda
 * does; a hand-made LD_PRELOAD may not).  The driver is loaded in the
 * doctor's process only, never in a program. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "doctor.h"
#include "doctor-util.h"
#include "../lib/options.h"
#include "../preload/cuda-probe.h"

static void check_preload_list(void) {
  const char *pre = getenv("LD_PRELOAD");
  if (!pre || !strstr(pre, "libhugepool_preload.so") || strstr(pre, "libhugepool_cuda_preload.so")) return;
  dr_problem(DR_WARNING, "hugepool-run --cuda -- PROGRAM   (or add libhugepool_cuda_preload.so to LD_PRELOAD after "
                         "libhugepool_preload.so)",
             "HUGEPOOL_CUDA is set and LD_PRELOAD has hugepool's interposer without its CUDA interposer: the "
             "program's CUDA registrations are not served");
}

void dr_check_cuda(void) {
  const char *mode = getenv(option_desc(HP_OPT_CUDA)->name);
  long long value = HP_CUDA_OFF;
  char expected[128];
  if (!mode || option_parse(HP_OPT_CUDA, mode, true, &value, expected, sizeof(expected)) != 0 ||
      value == HP_CUDA_OFF)
    return; /* unset, off, or a bad value (the environment section says so) */
  dr_section("cuda", "GPU host registration (HUGEPOOL_CUDA is set)");
  int rc = 0, n = dr_real_root() ? cuda_probe_devices(&rc) : -1;
  dr_kv_num("devices", n);
  if (n == -1) {
    dr_row("no CUDA driver (libcuda.so.1 cannot be loaded)");
    dr_problem(DR_WARNING, "unset HUGEPOOL_CUDA on this node (or install the NVIDIA driver)",
               "HUGEPOOL_CUDA=%s, and this node has no CUDA driver: nothing will be registered", mode);
  } else if (n < 0 || n == 0) {
    dr_row("the CUDA driver finds no device (%s %d)", n < 0 ? "CUresult" : "devices", n < 0 ? rc : 0);
    dr_problem(DR_WARNING, "unset HUGEPOOL_CUDA on this node (nvidia-smi shows what the driver sees)",
               "HUGEPOOL_CUDA=%s, and the CUDA driver finds no usable device: nothing will be registered", mode);
  } else {
    dr_row("CUDA driver: %d device%s", n, n == 1 ? "" : "s");
  }
  check_preload_list();
}

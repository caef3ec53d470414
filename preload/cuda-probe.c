/* SPDX-License-Identifier: BSD-3-Clause */
/* The CUDA driver probe of hugepool-run and the doctor (cuda-probe.h). */
#define _GNU_SOURCE
#include "cuda-probe.h"

#include <dlfcn.h>
#include <string.h>

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_count_fn)(int *);

int cuda_probe_devices(int *rc) {
  void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cuda) return -1;
  void *a = dlsym(cuda, "cuInit"), *b = dlsym(cuda, "cuDeviceGetCount");
  cu_init_fn init;
  cu_count_fn count;
  memcpy(&init, &a, sizeof(init));
  memcpy(&count, &b, sizeof(count));
  int n = 0;
  *rc = a && b ? init(0) : -1;
  if (*rc == 0) *rc = count(&n);
  (void)dlclose(cuda);
  return *rc == 0 ? n : -2;
}

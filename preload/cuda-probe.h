/* SPDX-License-Identifier: BSD-3-Clause */
/* The one probe of the CUDA driver from outside a program: load
 * libcuda.so.1, cuInit, cuDeviceGetCount, unload.  hugepool-run --cuda says
 * with it that there is nothing to register; the doctor's cuda section
 * (tools/doctor-cuda.c) reports with it.  The driver is loaded in their own
 * process only, never in a program they run; nothing of lib/ is needed.
 * Not installed. */
#ifndef HUGEPOOL_CUDA_PROBE_H
#define HUGEPOOL_CUDA_PROBE_H

/* The devices the driver finds (0 or more); -1 without a driver
 * (libcuda.so.1 cannot be loaded); -2 when the driver fails, *rc then the
 * CUresult of cuInit or cuDeviceGetCount, or -1 when it lacks either. */
int cuda_probe_devices(int *rc);

#endif /* HUGEPOOL_CUDA_PROBE_H */

#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""CuPy's pinned host memory with and without hugepool (bench/suites/gpu).

    gpu-cupy.py HUGEPOOL_RUN

- cupy.cuda.alloc_pinned_memory(1 GiB) (CuPy's PinnedMemoryPool over
  cudaHostAlloc), first and again after the pool gave it back, and its
  H2D copy rate, plain and under hugepool-run --cuda;
- hugepool.empty(..., pinned=True) copied with cupy.asarray: the copy rate,
  and whether the driver sees the array as page-locked host memory;
- the bytes that reach the device compared with the host's.
Each configuration runs in a process of its own.  Exits 77 with "skip:
REASON" without CuPy or without a device.
"""
import json
import sys

from gpu_child import run_child, run_sections, target

CHILD = r"""
import json, sys, time
import numpy as np
import cupy
mode = sys.argv[1]
n = 1 << 30
cupy.cuda.runtime.setDevice(0)
cupy.zeros(1)  # the context
dev = cupy.empty(n, dtype=cupy.uint8)
def rate(host_ptr):
    best = 0.0
    for _ in range(4):
        cupy.cuda.runtime.deviceSynchronize()
        t0 = time.perf_counter()
        cupy.cuda.runtime.memcpy(dev.data.ptr, host_ptr, n, cupy.cuda.runtime.memcpyHostToDevice)
        cupy.cuda.runtime.deviceSynchronize()
        best = max(best, n / 1e9 / (time.perf_counter() - t0))
    return best
if mode == "alloc":
    pool = cupy.get_default_pinned_memory_pool()
    times = []
    for _ in range(2):
        t0 = time.perf_counter()
        mem = cupy.cuda.alloc_pinned_memory(n)
        times.append((time.perf_counter() - t0) * 1e3)
        a = np.frombuffer(mem, dtype=np.uint8, count=n)
        a[::4096] = np.arange(a[::4096].size, dtype=np.uint8)
        gbs = rate(mem.ptr)
        same = bool((cupy.asnumpy(dev[::4096]) == a[::4096]).all())
        del a, mem
        pool.free_all_blocks()  # back to the driver: the second allocation is a fresh one
    print(json.dumps({"first_ms": times[0], "again_ms": times[1], "h2d_gbs": gbs, "same": same}))
else:
    import hugepool
    t0 = time.perf_counter()
    a = hugepool.empty(n, np.uint8, pinned=True)
    alloc_ms = (time.perf_counter() - t0) * 1e3
    a[::4096] = np.arange(a[::4096].size, dtype=np.uint8)
    attrs = cupy.cuda.runtime.pointerGetAttributes(a.ctypes.data)
    gbs = rate(a.ctypes.data)
    d = cupy.asarray(a)
    same = bool((cupy.asnumpy(d[::4096]) == a[::4096]).all())
    print(json.dumps({"alloc_ms": alloc_ms, "h2d_gbs": gbs, "same": same, "host_type": int(attrs.type),
                      "is_pinned": hugepool.is_pinned(a)}))
"""


def child(mode, preload=None):
    cmd = ([preload, "--cuda", "--"] if preload else []) + [sys.executable, "-c", CHILD, mode]
    return run_child(cmd)


def alloc_pinned_memory(run):
    plain = child("alloc")
    under = child("alloc", preload=run)
    for name, r in (("plain", plain), ("hugepool-run --cuda", under)):
        print(f"{name:28s} first {r['first_ms']:8.1f}  again {r['again_ms']:8.1f}  H2D {r['h2d_gbs']:6.1f} GB/s"
              f"  bytes {'same' if r['same'] else 'DIFFER'}")
    target("cupy.cuda.alloc_pinned_memory: the same bytes reach the device under hugepool-run --cuda",
           plain["same"] and under["same"], json.dumps({"plain": plain["same"], "hugepool": under["same"]}))


def pinned_array(_run):
    arr = child("array")
    print(f"{'hugepool.empty(pinned=True)':28s} alloc {arr['alloc_ms']:8.1f}  H2D {arr['h2d_gbs']:6.1f} GB/s"
          f"  pointer type {arr['host_type']} (1: host)")
    target("hugepool.empty(pinned=True) seen by CuPy as page-locked host memory, bytes intact",
           arr["host_type"] == 1 and arr["same"] and arr["is_pinned"], json.dumps(arr))


def main():
    run = sys.argv[1] if len(sys.argv) > 1 else "hugepool-run"
    try:
        import cupy
        if cupy.cuda.runtime.getDeviceCount() == 0:
            raise RuntimeError("no device")
    except Exception as e:  # ImportError, CUDARuntimeError: no CuPy or no device here
        print(f"skip: CuPy cannot run here ({e})")
        return 77
    print(f"== CuPy {cupy.__version__}: alloc_pinned_memory(1 GiB), ms, and H2D GB/s")
    return run_sections([("alloc_pinned_memory", alloc_pinned_memory),
                         ("hugepool.empty(pinned=True) with CuPy", pinned_array)], run)


if __name__ == "__main__":
    sys.exit(main())

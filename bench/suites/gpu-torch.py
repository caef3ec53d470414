#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""PyTorch's pinned host memory with and without hugepool (bench/suites/gpu).

    gpu-torch.py HUGEPOOL_RUN

- pin_memory() of a 1 GiB tensor, first and second time, on PyTorch's default
  path (cudaHostAlloc), with PYTORCH_CUDA_ALLOC_CONF=
  pinned_use_cuda_host_register:True (malloc, then cudaHostRegister), and
  under hugepool-run --cuda (which sets that and serves the registration);
- hugepool.empty(..., pinned=True) seen by torch: from_numpy(a).is_pinned();
- a 40-step training run, plain and under hugepool-run --cuda: the losses
  must be identical;
- a DataLoader(pin_memory=True) loop of 200 batches of 19 MiB (two worker
  processes, each batch copied to the device with non_blocking=True), plain
  and under hugepool-run --cuda: time per batch, and the device-side sums of
  every batch must be identical.
Each configuration runs in a process of its own (PyTorch reads its settings
once).  Exits 77 with "skip: REASON" without torch or without CUDA.
"""
import json
import os
import sys

from gpu_child import run_child, run_sections, target

CHILD = r"""
import json, os, sys, time
import torch
mode = sys.argv[1]
torch.cuda.init()
if mode == "pin":
    x = torch.empty(1 << 28, dtype=torch.float32)  # 1 GiB
    x.fill_(1.0)
    times = []
    for _ in range(2):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        y = x.pin_memory()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
        assert y.is_pinned()
        del y
    print(json.dumps({"first_ms": times[0], "second_ms": times[1]}))
elif mode == "pinned-array":
    import numpy as np
    import hugepool
    torch.zeros(1, device="cuda")  # the context hugepool registers in (torch.cuda.init() makes none)
    t0 = time.perf_counter()
    a = hugepool.empty(1 << 28, np.float32, pinned=True)  # 1 GiB
    alloc_ms = (time.perf_counter() - t0) * 1e3
    t = torch.from_numpy(a)
    d = t.to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    print(json.dumps({"is_pinned": bool(t.is_pinned()), "hugepool_is_pinned": hugepool.is_pinned(a),
                      "alloc_ms": alloc_ms}))
elif mode == "loader":
    class Batches(torch.utils.data.Dataset):
        def __len__(self):
            return 200 * 32
        def __getitem__(self, i):
            return torch.full((3, 224, 224), float(i % 251))
    loader = torch.utils.data.DataLoader(Batches(), batch_size=32, num_workers=2, pin_memory=True)
    total = torch.zeros((), dtype=torch.float64, device="cuda")
    times = []
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for b in loader:
        assert b.is_pinned()
        total += b.to("cuda", non_blocking=True).sum(dtype=torch.float64)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        times.append((t1 - t0) * 1e3)
        t0 = t1
    times.sort()
    print(json.dumps({"batches": len(times), "sum": total.item(), "median_ms": times[len(times) // 2],
                      "min_ms": times[0], "max_ms": times[-1], "total_ms": sum(times)}))
else:
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.randn(40, 256, 512).pin_memory()
    labels = torch.randint(0, 10, (40, 256))
    losses = []
    for step in range(40):
        xb = data[step].to("cuda", non_blocking=True)
        loss = torch.nn.functional.cross_entropy(model(xb), labels[step].cuda())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    print(json.dumps({"losses": losses}))
"""


def child(mode, env_extra=None, preload=None):
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    env.update(env_extra or {})
    env["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    cmd = ([preload, "--cuda", "--"] if preload else []) + [sys.executable, "-c", CHILD, mode]
    return run_child(cmd, env)


def pin(run):
    print("== pin_memory() of 1 GiB, ms")
    default = child("pin")
    register = child("pin", {"PYTORCH_CUDA_ALLOC_CONF": "pinned_use_cuda_host_register:True"})
    hugepool = child("pin", preload=run)
    for name, r in (("default (cudaHostAlloc)", default), ("pinned_use_cuda_host_register", register),
                    ("hugepool-run --cuda", hugepool)):
        print(f"{name:40s} first {r['first_ms']:9.1f}   second {r['second_ms']:9.1f}")
    target("PyTorch's first pin_memory() of 1 GiB <= 0.25x its default path",
           hugepool["first_ms"] <= 0.25 * default["first_ms"],
           f"{hugepool['first_ms']:.1f} vs {default['first_ms']:.1f} ms")


def pinned_array(_run):
    arr = child("pinned-array", {"PYTHONPATH": os.environ.get("PYTHONPATH", "")})
    target("hugepool.empty(pinned=True): torch.from_numpy(a).is_pinned()", arr["is_pinned"], json.dumps(arr))


def train(run):
    plain = child("train")["losses"]
    under = child("train", preload=run)["losses"]
    target("PyTorch training losses identical with and without hugepool", plain == under,
           f"{len(plain)} steps, last {plain[-1]:.6f} vs {under[-1]:.6f}")


def loader(run):
    print("== DataLoader(pin_memory=True, num_workers=2), 200 batches of 19 MiB, ms a batch")
    plain = child("loader")
    under = child("loader", preload=run)
    for name, r in (("plain", plain), ("hugepool-run --cuda", under)):
        print(f"{name:40s} median {r['median_ms']:7.2f}  min {r['min_ms']:7.2f}  max {r['max_ms']:7.2f}"
              f"  total {r['total_ms']:8.1f}  batches {r['batches']}")
    target("DataLoader(pin_memory=True): the same bytes reach the device with and without hugepool",
           plain["sum"] == under["sum"] and plain["batches"] == under["batches"] == 200,
           f"sum {plain['sum']:.1f} vs {under['sum']:.1f}")
    target("DataLoader(pin_memory=True) under hugepool-run --cuda <= 1.1x plain per batch",
           under["median_ms"] <= 1.1 * plain["median_ms"],
           f"{under['median_ms']:.2f} vs {plain['median_ms']:.2f} ms")


def main():
    run = sys.argv[1] if len(sys.argv) > 1 else "hugepool-run"
    try:
        import torch
    except ImportError:
        print("skip: no PyTorch for this Python")
        return 77
    if not torch.cuda.is_available():
        print("skip: PyTorch sees no CUDA device")
        return 77
    print(f"== PyTorch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    return run_sections([(section.__name__, section) for section in (pin, pinned_array, train, loader)], run)


if __name__ == "__main__":
    sys.exit(main())

# SPDX-License-Identifier: BSD-3-Clause
"""mpi4py ping-pong and Allreduce on numpy.empty against hugepool.empty
arrays, 1-64 MiB, in one run (`bench/run python` runs it under mpirun with 2 ranks).

Two ways to hold the buffers, as Python codes do:
  reused  the arrays are allocated once per size and reused every iteration;
  fresh   every iteration allocates its arrays (np.empty / hugepool.empty),
          writes them and drops them: numpy's memory goes back to glibc
          (unmapped at these sizes), hugepool's to its cache.
Each (size, mode, allocator) is timed in `rounds` rounds, the allocators'
order rotated between rounds; rank 0 prints one JSON line per measurement
with the median, min and max over the rounds.
"""
import json
import sys
import time

import numpy as np
from mpi4py import MPI

import hugepool

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
peer = 1 - rank
ALLOC = {"numpy": np.empty, "hugepool": hugepool.empty}
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
sizes = [1 << 20 << k for k in range(7)]  # 1..64 MiB


def iterations(nbytes):
    return max(4, min(40, (256 << 20) // nbytes))


def pingpong(make, nbytes, fresh, iters):
    n = nbytes // 8
    buf = make(n)
    buf[:] = 1.0
    comm.Barrier()
    t = time.perf_counter()
    for _ in range(iters):
        if fresh:
            buf = None  # dropped, as a temporary array is
            buf = make(n)
            buf[:] = 1.0
        if rank == 0:
            comm.Send(buf, dest=peer, tag=1)
            comm.Recv(buf, source=peer, tag=2)
        else:
            comm.Recv(buf, source=peer, tag=1)
            comm.Send(buf, dest=peer, tag=2)
    t = time.perf_counter() - t
    return 2 * nbytes * iters / t / 1e9  # GB/s, both directions


def allreduce(make, nbytes, fresh, iters):
    n = nbytes // 8
    a, r = make(n), make(n)
    a[:] = 1.0
    comm.Barrier()
    t = time.perf_counter()
    for _ in range(iters):
        if fresh:
            a = r = None
            a, r = make(n), make(n)
            a[:] = 1.0
        comm.Allreduce(a, r, op=MPI.SUM)
    t = time.perf_counter() - t
    if r[0] != comm.Get_size():
        raise SystemExit("Allreduce gave a wrong sum")
    return t / iters * 1e3  # ms per call


def main():
    results = {}
    for rnd in range(rounds):
        order = list(ALLOC) if rnd % 2 == 0 else list(reversed(ALLOC))
        for nbytes in sizes:
            for fresh in (False, True):
                for name in order:
                    make = ALLOC[name]
                    it = iterations(nbytes)
                    pingpong(make, nbytes, fresh, 2)  # warm-up
                    bw = pingpong(make, nbytes, fresh, it)
                    allreduce(make, nbytes, fresh, 2)
                    ms = allreduce(make, nbytes, fresh, it)
                    key = (nbytes, "fresh" if fresh else "reused", name)
                    results.setdefault(key + ("pingpong_GBps",), []).append(bw)
                    results.setdefault(key + ("allreduce_ms",), []).append(ms)
            hugepool.trim()  # keep the pool's use to one size at a time
    if rank == 0:
        for (nbytes, mode, name, metric), v in sorted(results.items()):
            v = sorted(v)
            print(json.dumps({"MiB": nbytes >> 20, "mode": mode, "alloc": name, "metric": metric,
                              "median": v[len(v) // 2], "min": v[0], "max": v[-1], "rounds": len(v)}), flush=True)


main()

# SPDX-License-Identifier: BSD-3-Clause
"""hugepool arrays as mpi4py buffers, and hugepool.mpi.NodeSegments, under
mpirun (mpi.sh: a pool of exactly 64 free 2 MB pages, 2 ranks).  Every check
is on the data received and on the kernel's view (smaps); each rank prints
"rank R: all checks passed"."""
import sys

import numpy as np
from mpi4py import MPI

import hugepool
import hugepool.mpi
from kernel_view import on_hugetlb

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
right, left = (rank + 1) % size, (rank - 1) % size
failures = 0
N = 1 << 20  # float64: 8 MiB a buffer


def check(ok, what):
    global failures
    print(f"rank {rank}: {'ok  ' if ok else 'FAIL'} {what}", flush=True)
    failures += not ok


def addr(a):
    return a.__array_interface__["data"][0]


# Allreduce, out of place and in place, on hugepool arrays.
for it in range(3):
    a = hugepool.empty(N)
    r = hugepool.empty(N)
    a[:] = np.arange(N) + (rank + 1) * 1000 + it
    where = addr(r)
    comm.Allreduce(a, r, op=MPI.SUM)
    expect = size * np.arange(N) + 1000 * size * (size + 1) // 2 + size * it
    check(addr(r) == where and np.array_equal(r, expect), f"Allreduce into a hugepool array, iteration {it}")
    comm.Allreduce(MPI.IN_PLACE, a, op=MPI.SUM)
    check(np.array_equal(a, expect), f"Allreduce in place, iteration {it}")
    check(on_hugetlb(addr(a), a.nbytes) and on_hugetlb(addr(r), r.nbytes), "both on 2 MB hugetlb pages (smaps)")
    del a, r

# A halo exchange on a ring: the boundary layers of a 2-D block go to both
# neighbours every iteration, through send/receive buffers reused each time.
H = 512
block = hugepool.zeros((H + 2, 2048))  # one ghost row each side
send_lo, send_hi = hugepool.empty(2048), hugepool.empty(2048)
recv_lo, recv_hi = hugepool.empty(2048), hugepool.empty(2048)
bad = 0
for it in range(10):
    block[1:-1] = rank * 100 + it + np.arange(2048) / 4096
    send_lo[:] = block[1]
    send_hi[:] = block[-2]
    reqs = [comm.Irecv(recv_lo, source=left, tag=1), comm.Irecv(recv_hi, source=right, tag=2),
            comm.Isend(send_hi, dest=right, tag=1), comm.Isend(send_lo, dest=left, tag=2)]
    MPI.Request.Waitall(reqs)
    block[0] = recv_lo
    block[-1] = recv_hi
    bad += not np.array_equal(block[0], left * 100 + it + np.arange(2048) / 4096)
    bad += not np.array_equal(block[-1], right * 100 + it + np.arange(2048) / 4096)
check(bad == 0, "halo exchange: 10 iterations, ghost rows hold the neighbours' boundary rows")
check(on_hugetlb(addr(block), block.nbytes) and on_hugetlb(addr(recv_lo), 4096), "halo buffers on 2 MB hugetlb pages")
del block, send_lo, send_hi, recv_lo, recv_hi

# Node segments: a numpy view of every rank's segment on the node.
segs = hugepool.mpi.NodeSegments(comm, 8 * N)
check(segs.node_size == size and segs.node_rank == rank, "NodeSegments over the node")
mine = segs.array(segs.node_rank, dtype=np.float64)
mine[:] = rank * 1e9 + np.arange(N)
check(on_hugetlb(addr(mine), mine.nbytes), "own segment on 2 MB hugetlb pages (smaps)")
segs.node_comm.Barrier()
for p in range(segs.node_size):
    peer = segs.array(p, dtype=np.float64)
    check(np.array_equal(peer, p * 1e9 + np.arange(N)) and on_hugetlb(addr(peer), peer.nbytes),
          f"node rank {p}'s segment seen here: its values, on hugetlb pages")
segs.node_comm.Barrier()
segs.array(right, dtype=np.float64)[: N // 4] = -mine[-N // 4:]
segs.node_comm.Barrier()
check(np.array_equal(mine[: N // 4], -(left * 1e9 + np.arange(3 * N // 4, N))),
      "the left neighbour's stores arrived in this segment")
del mine, peer
segs.free()

# A segment no pool covers: MemoryError in every rank, nothing held.
try:
    hugepool.mpi.NodeSegments(comm, 64 << 30)
    check(False, "a 64 GiB NodeSegments raises MemoryError")
except MemoryError as e:
    check("cannot create a segment of 68719476736 bytes" in str(e), f"a 64 GiB NodeSegments: MemoryError: {e}")

comm.Barrier()
if failures:
    print(f"rank {rank}: {failures} checks failed", flush=True)
    sys.exit(1)
print(f"rank {rank}: all checks passed", flush=True)

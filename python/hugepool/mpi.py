# SPDX-License-Identifier: BSD-3-Clause
"""Node-shared hugetlb segments for the ranks of an mpi4py communicator.

    from mpi4py import MPI
    import numpy as np
    import hugepool.mpi

    segs = hugepool.mpi.NodeSegments(MPI.COMM_WORLD, 64 << 20)
    mine = segs.array(segs.node_rank, dtype=np.float64)    # this rank's 64 MiB
    right = segs.array((segs.node_rank + 1) % segs.node_size, dtype=np.float64)
    right[:1024] = mine[-1024:]          # a store into the neighbour's memory
    segs.node_comm.Barrier()
    segs.free()                          # collective

Every rank gets its own segment and a numpy view of every node peer's, so
ranks on one node copy into each other's buffers with plain numpy.  The
constructor succeeds in every rank or raises the same error in every rank
(MemoryError when some rank's pool is short), never leaving some ranks
waiting.  It runs on hugepool's segments and mpi4py alone, so it works with
whichever MPI mpi4py was built against.
"""

import errno as _errno

from . import Segment, map_segment, segment

__all__ = ["NodeSegments"]


class NodeSegments:
    """Collective over comm: splits it by node (COMM_TYPE_SHARED), creates a
    segment of nbytes bytes in every rank (nbytes may differ between ranks)
    and maps every node peer's.

    Attributes: node_comm (the ranks of comm on this node, owned), node_rank,
    node_size, segments (a Segment per node rank).
    """

    def __init__(self, comm, nbytes, node=-1):
        from mpi4py import MPI

        self.comm = comm
        self.node_comm = comm.Split_type(MPI.COMM_TYPE_SHARED)
        self.node_rank = self.node_comm.Get_rank()
        self.node_size = self.node_comm.Get_size()
        self.segments = None
        own = None
        failure = None
        try:
            own = segment(nbytes, node)
        except (MemoryError, ValueError, OSError) as e:
            failure = e
        self._agree(failure)
        handles = self.node_comm.allgather(own.handle)
        segs = []
        failure = None
        try:
            for r, h in enumerate(handles):
                segs.append(own if r == self.node_rank else map_segment(h))
        except OSError as e:
            failure = e
        try:
            self._agree(failure)
        except BaseException:
            del segs, own
            raise
        self.segments = segs

    def _agree(self, failure):
        """Raise, in every rank, the first failure any rank of comm had."""
        code = 0
        text = ""
        if failure is not None:
            code = _errno.ENOMEM if isinstance(failure, MemoryError) else getattr(failure, "errno", None) or _errno.EIO
            text = str(failure)
        reports = self.comm.allgather((code, text))
        for rank, (c, t) in enumerate(reports):
            if c:
                self.node_comm.Free()
                self.node_comm = None
                msg = f"hugepool.mpi.NodeSegments: rank {rank} of the communicator: {t}"
                if c == _errno.ENOMEM:
                    raise MemoryError(msg)
                raise OSError(c, msg)

    def segment(self, rank):
        """Node rank `rank`'s Segment, mapped here."""
        return self.segments[rank]

    def array(self, rank, shape=None, dtype="uint8", order="C", offset=0):
        """A numpy view of node rank `rank`'s segment (see Segment.array)."""
        return self.segments[rank].array(shape, dtype, order, offset)

    def free(self):
        """Collective: a barrier on the node (no rank unmaps a segment a
        peer may still be writing), then this rank's mappings are dropped and
        node_comm freed.  Arrays still held keep their mapping alive."""
        if self.node_comm is None:
            raise ValueError("hugepool.mpi.NodeSegments: already freed")
        self.node_comm.Barrier()
        self.segments = None
        self.node_comm.Free()
        self.node_comm = None

# SPDX-License-Identifier: BSD-3-Clause
"""numpy arrays on guaranteed hugetlb pages, from hugepool.

hugepool gives every buffer explicit hugetlb pages (2 MB by default) that
the kernel reserved when they were mapped: touching them never faults with
SIGBUS, and a registration (MPI, RDMA, io_uring) covers 512 times fewer
pages than on 4 KB memory.  A freed buffer is kept in a bounded cache and
handed out again with no system call and no page fault.

    import numpy as np
    import hugepool

    a = hugepool.empty((4096, 4096))          # 128 MiB of float64 on 2 MB pages
    b = hugepool.zeros(1 << 20, dtype=np.complex128)
    a[:] = 1.0                                # an ordinary numpy array
    del a                                     # back to hugepool's cache
    print(hugepool.stats()["cache_hits"], hugepool.pool_free_pages())

The arrays are ordinary numpy arrays whose memory is a hugepool buffer: no
copy is ever made, views and slices keep the buffer alive, and it goes back
to hugepool's cache when the last array, view or memoryview of it is gone.
They are buffer-protocol objects, so mpi4py sends and receives them in
place (comm.Send(a, ...), comm.Allreduce(MPI.IN_PLACE, a)).

Errors: when the pool cannot cover a request, empty() and zeros() raise
MemoryError with the reason (the size, the free pages, what to do), unless a
fallback policy is set (set_policy('thp') or 'small'; every fallback is
counted in stats()).  HUGEPOOL_* environment variables set the defaults, as
for every program that links hugepool.

Node-shared segments: segment() creates memory other processes of the same
user on the node map with map_segment(handle); hugepool.mpi.NodeSegments
does it for the ranks of an mpi4py communicator (a numpy view of every
node peer's segment).

fork and multiprocessing: a forked child gets private copies of every live
hugetlb buffer at fork (HUGEPOOL_FORK=copy, the default), so it never dies
of SIGBUS on a short pool; multiprocessing's default start method on Linux
forks every worker and pays that copy each time (measured: Pool(4) over a
400 MB array on hugetlb pages starts in about 3x the plain time).  Under
hugepool-run outside MPI ranks an array of more than an eighth of the pool
(and 64 MiB) stays with glibc (HUGEPOOL_HOLD=share) and its workers start at
the plain cost; hugepool.empty() always puts it on hugetlb pages.  Use
multiprocessing.set_start_method('forkserver') (or 'spawn'), whose workers
start from a process with no large buffers, or HUGEPOOL_FORK=keep where the
free pool covers every page parent and workers write (no copy; the kernel
kills a child with SIGBUS when a write finds the pool empty).  Under
hugepool-run --small-heap, CPython's own small objects go on huge pages too:
the preload gives pymalloc an arena allocator whose arenas share 2 MB hugetlb
pages (measured: 98-99% of a dict-heavy heap, at plain CPython's speed).
"""

import errno as _errno
import sys as _sys

from ._version import BUILT_FOR as _BUILT_FOR, BUILT_WITH as _BUILT_WITH, __version__


def _interpreter():
    return f"Python {_sys.version_info[0]}.{_sys.version_info[1]} ({_sys.executable})"


try:
    import numpy as _np
except ImportError as _e:
    raise ImportError(
        f"hugepool {__version__} needs numpy, which {_interpreter()} cannot import ({_e}); "
        f"install it for this interpreter (Debian: apt install python3-numpy; else: "
        f"{_sys.executable} -m pip install numpy), or run the interpreter hugepool was built "
        f"for: {_BUILT_WITH}", name=_e.name) from _e

try:
    from . import _core
except ImportError as _e:
    if f"{_sys.version_info[0]}.{_sys.version_info[1]}" != _BUILT_FOR:
        raise ImportError(
            f"hugepool {__version__} was built for Python {_BUILT_FOR} ({_BUILT_WITH}), "
            f"and this is {_interpreter()}: run that interpreter, or rebuild hugepool with "
            f"-DPython3_EXECUTABLE={_sys.executable}", name=_e.name) from _e
    raise

__all__ = [
    "__version__",
    "empty", "zeros", "empty_like", "zeros_like", "is_hugepool", "is_pinned", "buffer_of",
    "stats", "stats_text", "trim", "pool_free_pages",
    "set_policy", "get_policy", "set_page_size", "get_page_size", "set_cache_limits",
    "Segment", "segment", "map_segment", "Buffer",
]

Buffer = _core.Buffer
_POLICIES = ("strict", "thp", "small")


def _shape_of(shape):
    if isinstance(shape, (int, _np.integer)):
        shape = (int(shape),)
    shape = tuple(int(n) for n in shape)
    if any(n < 0 for n in shape):
        raise ValueError(f"negative dimensions are not allowed: {shape}")
    return shape


def _array(buf, shape, dtype, order, offset=0):
    count = 1
    for n in shape:
        count *= n
    flat = _np.frombuffer(buf, dtype=dtype, count=count, offset=offset)
    return flat.reshape(shape, order=order)


_cuda_registrar = None


def _cuda():
    global _cuda_registrar
    if _cuda_registrar is None:
        _cuda_registrar = _core.registrar_cuda()
    return _cuda_registrar


def empty(shape, dtype=float, order="C", *, zero=False, pinned=False):
    """Return a new array of the given shape and dtype on hugetlb pages,
    without initializing entries (as numpy.empty).

    shape: int or tuple of ints.  dtype: any numpy dtype without Python
    objects.  order: 'C' (row-major) or 'F' (column-major).  zero=True
    clears it (as zeros()).

    The memory is one hugepool buffer, rounded up to whole huge pages; a
    buffer reused from the cache holds what its last owner wrote.  It goes
    back to the cache when the last reference to the array (or to any view
    of it) goes.  A zero-size array takes no buffer (numpy's own).

    pinned=True registers the buffer's whole mapping with the CUDA driver
    (page-locked, portable and mapped: what cudaHostRegister gives), once:
    it stays registered while hugepool caches it, so the next pinned array
    of that size costs no registration.  torch.from_numpy(a) and
    cupy.asarray copies use it as pinned memory.  hugepool never creates a
    CUDA context: make one first, with anything that puts memory on the
    device (torch.zeros(1, device="cuda"), cupy.zeros(1)); torch.cuda.init()
    makes none (PyTorch 2.11: measured).  Without a context: OSError with
    errno ENXIO; without a driver or device: ENODEV.

    Raises MemoryError with hugepool's reason when the pool cannot cover
    the request under the strict policy (the default).
    """
    shape = _shape_of(shape)
    dtype = _np.dtype(dtype)
    if dtype.hasobject:
        raise TypeError("hugepool arrays cannot hold Python objects")
    if order not in ("C", "F"):
        raise ValueError("order must be 'C' or 'F'")
    nbytes = dtype.itemsize
    for n in shape:
        nbytes *= n
    if nbytes > _sys.maxsize:  # as numpy.empty says it
        raise ValueError("array is too big; `arr.size * arr.dtype.itemsize` is larger than the maximum possible size.")
    registrar = _cuda() if pinned else 0
    if nbytes == 0:
        return _np.empty(shape, dtype=dtype, order=order)
    try:
        buf = _core.alloc(nbytes, zero, registrar)
    except OSError as e:
        if pinned and e.errno == _errno.ENXIO:
            raise OSError(e.errno, "hugepool.empty(pinned=True): this process has no CUDA context, and hugepool never "
                          "creates one: make one first (torch.zeros(1, device=\"cuda\"), cupy.zeros(1); "
                          "torch.cuda.init() makes none)") from e
        raise
    return _array(buf, shape, dtype, order)


def zeros(shape, dtype=float, order="C", *, pinned=False):
    """Return a new array of the given shape and dtype on hugetlb pages,
    filled with zeros (as numpy.zeros).  See empty()."""
    return empty(shape, dtype, order, zero=True, pinned=pinned)


def empty_like(a, dtype=None):
    """empty() with the shape (and, unless given, the dtype) of array a."""
    a = _np.asarray(a)
    return empty(a.shape, a.dtype if dtype is None else dtype, "F" if _np.isfortran(a) else "C")


def zeros_like(a, dtype=None):
    """zeros() with the shape (and, unless given, the dtype) of array a."""
    a = _np.asarray(a)
    return zeros(a.shape, a.dtype if dtype is None else dtype, "F" if _np.isfortran(a) else "C")


def buffer_of(a):
    """The hugepool Buffer behind array a (its .address, .nbytes, .kind),
    or None if a's memory is not hugepool's."""
    base = a
    while base is not None:
        if isinstance(base, Buffer):
            return base
        if isinstance(base, memoryview):
            base = base.obj
        else:
            base = getattr(base, "base", None)
    return None


def is_hugepool(a):
    """True if array a's memory is a hugepool buffer or segment."""
    return buffer_of(a) is not None


def is_pinned(a):
    """True if array a's memory is a hugepool buffer registered with the
    CUDA driver (empty(..., pinned=True))."""
    buf = buffer_of(a)
    return buf is not None and _cuda_registrar is not None and _core.is_registered(buf.address, _cuda_registrar)


def stats():
    """hugepool's counters as a dict (allocs, frees, failures, cache_hits,
    cache_misses, bytes_live, bytes_cached, live_buffers, fallbacks_thp, ...;
    see hugepool.h).  They count this process's requests through hugepool."""
    return _core.stats()


def stats_text(json=False):
    """The counters as hugepool's stats report prints them (text or JSON)."""
    return _core.stats_text(json)


def trim():
    """Give every cached buffer back to the kernel's pool; returns the bytes
    released.  Live arrays are not touched."""
    return _core.trim()


def pool_free_pages(node=-1):
    """Free huge pages of the current page size in the kernel's pool (on
    NUMA node `node`, or all nodes); -1 if unknown."""
    return _core.pool_free_pages(node)


def set_policy(policy):
    """What a request the pool cannot cover gets: 'strict' (MemoryError, the
    default), 'thp' (transparent huge pages) or 'small' (4 KB pages)."""
    if policy not in _POLICIES:
        raise ValueError(f"policy must be one of {_POLICIES}, not {policy!r}")
    _core.set_policy(_POLICIES.index(policy))


def get_policy():
    """The current policy: 'strict', 'thp' or 'small'."""
    return _core.policy_name(_core.get_policy())


def set_page_size(nbytes):
    """Huge page size for later allocations: 2 MB (2 << 20) or 1 GB
    (1 << 30) where the kernel has it (else OSError)."""
    _core.set_page_size(nbytes)


def get_page_size():
    """The huge page size of later allocations, in bytes."""
    return _core.get_page_size()


def set_cache_limits(max_buffers, max_bytes):
    """How many freed buffers, and how many bytes, the cache keeps (0
    buffers: no cache).  Shrinking evicts what no longer fits."""
    _core.set_cache_limits(max_buffers, max_bytes)


class Segment:
    """A node-shared segment: memory on hugetlb pages that other processes
    of the same user on this node map too (segment() creates one,
    map_segment() maps another process's).  Its pages are reserved when it
    is created: a short pool is MemoryError then, never a fault later.

    .handle is what the creator sends to the processes that map it (bytes);
    .array() is a numpy view of it.  The mapping here goes away when the
    Segment and every array made from it are gone; the pages go back to the
    pool when no process maps it any more.
    """

    def __init__(self, buf):
        self._buf = buf

    @property
    def handle(self):
        """The bytes a peer passes to map_segment()."""
        return self._buf.handle

    @property
    def nbytes(self):
        """The segment's size in bytes: whole huge pages."""
        return self._buf.nbytes

    @property
    def address(self):
        """Its address in this process."""
        return self._buf.address

    @property
    def created(self):
        """True in the process that created it."""
        return self._buf.kind == "segment"

    def array(self, shape=None, dtype=_np.uint8, order="C", offset=0):
        """A numpy view (no copy) of the segment from byte `offset`: of the
        given shape, or as many dtype items as fit."""
        dtype = _np.dtype(dtype)
        if shape is None:
            shape = ((self.nbytes - offset) // dtype.itemsize,)
        shape = _shape_of(shape)
        return _array(self._buf, shape, dtype, order, offset)

    def __repr__(self):
        return f"<hugepool.Segment {self.nbytes} bytes at {self.address:#x} ({self._buf.kind})>"


def segment(nbytes, node=-1):
    """Create a node-shared segment of at least nbytes bytes (whole pages,
    every page reserved and populated, on NUMA node `node` if given).
    Raises MemoryError with the reason when the pool is short."""
    return Segment(_core.segment_create(int(nbytes), int(node)))


def map_segment(handle):
    """Map another process's segment from the handle it sent (bytes).
    OSError (EPERM: another user's; ESRCH: its creator is gone; ESTALE: a
    stale handle) if it cannot be mapped."""
    return Segment(_core.segment_map(bytes(handle)))

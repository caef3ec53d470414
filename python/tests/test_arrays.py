# SPDX-License-Identifier: BSD-3-Clause
"""The hugepool package without MPI, checked from the kernel's view
(/proc/self/smaps, /proc/meminfo).  Run with a pool of exactly 600 free 2 MB
pages (tests/preload/with-pool) and PYTHONPATH at the package."""
import gc
import json
import pydoc
import unittest

import numpy as np

import hugepool
from kernel_view import free_pages, hugetlb_pages, on_hugetlb, smaps

MiB = 1 << 20


def addr(a):
    return a.__array_interface__["data"][0]


class Arrays(unittest.TestCase):
    def setUp(self):
        hugepool.trim()
        self.mapped0 = hugetlb_pages()

    def tearDown(self):
        gc.collect()
        hugepool.trim()
        hugepool.set_policy("strict")
        self.assertEqual(hugetlb_pages(), self.mapped0, "after trim this process holds no more pages than before")

    def test_placement_every_dtype_and_order(self):
        for dtype in (np.float32, np.float64, np.complex64, np.complex128, np.int32, np.int64, np.uint8):
            for order in ("C", "F"):
                a = hugepool.empty((768, 1024 * 4 // np.dtype(dtype).itemsize), dtype, order)
                a[...] = 3
                a[0, 0] = 5
                self.assertEqual(a.dtype, np.dtype(dtype))
                self.assertEqual(a.nbytes, 3 * MiB)
                self.assertTrue(a.flags["C_CONTIGUOUS" if order == "C" else "F_CONTIGUOUS"])
                self.assertTrue(a.flags["WRITEABLE"])
                self.assertTrue(on_hugetlb(addr(a), a.nbytes), f"{dtype} {order}: {smaps(addr(a))}")
                self.assertEqual(int((a == 5).sum()), 1)
                self.assertTrue(hugepool.is_hugepool(a))
                del a

    def test_freed_back_to_the_cache(self):
        a = hugepool.empty(MiB, np.float64)  # 8 MiB
        first = addr(a)
        a[:] = 1
        del a
        n = hugetlb_pages()
        b = hugepool.empty(MiB, np.float64)
        self.assertEqual(addr(b), first, "the next array of that size is the same mapping")
        self.assertEqual(hugetlb_pages(), n, "reuse maps no new page")
        self.assertTrue(on_hugetlb(addr(b), b.nbytes))

    def test_a_view_keeps_the_buffer(self):
        a = hugepool.empty(MiB, np.float64)
        a[:] = np.arange(MiB)
        first = addr(a)
        v = a[MiB // 2:]
        m = memoryview(a)
        del a
        b = hugepool.empty(MiB, np.float64)
        self.assertNotEqual(addr(b), first, "a live view's buffer is not handed out again")
        self.assertTrue(np.array_equal(v, np.arange(MiB // 2, MiB)))
        del v
        c = hugepool.empty(MiB, np.float64)
        self.assertNotEqual(addr(c), first, "a memoryview keeps it too")
        del m  # the last reference: the buffer is freed, the last one of its size
        d = hugepool.empty(MiB, np.float64)
        self.assertEqual(addr(d), first, "once the last reference is gone it is reused")
        del c, d

    def test_zeros_clears_a_reused_buffer(self):
        a = hugepool.empty(MiB, np.float64)
        a[:] = 7
        first = addr(a)
        del a
        z = hugepool.zeros(MiB, np.float64)
        self.assertEqual(addr(z), first)
        self.assertFalse(z.any())

    def test_zero_size_and_bad_input(self):
        self.assertEqual(hugepool.empty((0, 5)).shape, (0, 5))
        with self.assertRaises(ValueError):
            hugepool.empty((-1, 5))
        with self.assertRaises(TypeError):
            hugepool.empty(10, dtype=object)
        with self.assertRaises(ValueError):  # as numpy.empty((1 << 62, 4))
            hugepool.empty((1 << 62, 4))

    def test_enomem_is_memoryerror_with_the_reason(self):
        n = hugetlb_pages()
        with self.assertRaises(MemoryError) as e:
            hugepool.empty(2 << 30, np.uint8)
        text = str(e.exception)
        self.assertIn("cannot allocate 2147483648 bytes on 2 MB pages", text)
        self.assertRegex(text, r"1024 pages needed, \d+ free in the pool, policy strict")
        self.assertEqual(hugetlb_pages(), n, "a failed request maps nothing")
        self.assertGreaterEqual(hugepool.stats()["failures"], 1)

    def test_past_one_gigabyte(self):
        hugepool.set_cache_limits(64, 2 << 30)
        n = hugetlb_pages()
        a = hugepool.empty((400, 400, 900), np.float64)  # 1.15 GB
        a[...] = 1.5
        a[-1, -1, -1] = 2.5
        self.assertTrue(on_hugetlb(addr(a), a.nbytes))
        self.assertEqual(hugetlb_pages() - n, 550)
        self.assertEqual(a.sum(), 1.5 * (a.size - 1) + 2.5)
        del a
        self.assertEqual(hugetlb_pages() - n, 550, "cached")
        self.assertGreaterEqual(hugepool.trim(), 400 * 400 * 900 * 8)
        self.assertEqual(hugetlb_pages(), n, "trim unmaps it")

    def test_policy_thp(self):
        self.assertEqual(hugepool.get_policy(), "strict")
        hugepool.set_policy("thp")
        a = hugepool.empty(1280 * MiB, np.uint8)
        a[0] = 1
        self.assertEqual(smaps(addr(a))["KernelPageSize"], 4)
        self.assertEqual(hugepool.buffer_of(a).kind, "thp")
        self.assertGreaterEqual(hugepool.stats()["fallbacks_thp"], 1)
        with self.assertRaises(ValueError):
            hugepool.set_policy("never")

    def test_page_size(self):
        self.assertEqual(hugepool.get_page_size(), 2 * MiB)
        with self.assertRaises(ValueError):
            hugepool.set_page_size(3 * MiB)

    def test_stats(self):
        a = hugepool.empty(MiB, np.float64)
        s = hugepool.stats()
        self.assertEqual(s["live_buffers"], 1)
        self.assertEqual(s["bytes_live"], 8 * MiB)
        self.assertIn("live_buffers", json.loads(hugepool.stats_text(json=True)))
        before = free_pages()
        mine = hugepool.pool_free_pages()
        after = free_pages()
        self.assertTrue(min(before, after) <= mine <= max(before, after), (before, mine, after))
        del a

    def test_segment(self):
        seg = hugepool.segment(4 * MiB)
        self.assertEqual(seg.nbytes, 4 * MiB)
        self.assertTrue(seg.created)
        a = seg.array(dtype=np.int32)
        a[:] = np.arange(a.size, dtype=np.int32)
        self.assertTrue(on_hugetlb(seg.address, seg.nbytes))
        peer = hugepool.map_segment(seg.handle)
        self.assertNotEqual(peer.address, seg.address)
        self.assertFalse(peer.created)
        self.assertTrue(np.array_equal(peer.array(dtype=np.int32), a))
        with self.assertRaises(ValueError):
            hugepool.map_segment(b"short")
        with self.assertRaises(MemoryError):
            hugepool.segment(2 << 30)

    def test_pinned_without_a_driver_is_enodev(self):
        import ctypes
        import errno
        import os
        try:
            ctypes.CDLL("libcuda.so.1")  # what hugepool opens
            self.skipTest("a CUDA driver is installed: bench/gpu-torch.py covers pinned arrays there")
        except OSError:
            pass
        err_fd = os.dup(2)  # the one line hugepool writes is expected, not shown
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            try:
                with self.assertRaises(OSError) as ctx:
                    hugepool.empty(1 << 20, np.uint8, pinned=True)
            finally:
                os.dup2(err_fd, 2)
                os.close(err_fd)
        self.assertEqual(ctx.exception.errno, errno.ENODEV)
        self.assertIn("CUDA driver", str(ctx.exception))
        a = hugepool.empty(1 << 20, np.uint8)  # unpinned arrays are unaffected
        self.assertFalse(hugepool.is_pinned(a))

    def test_help(self):
        text = pydoc.render_doc(hugepool, renderer=pydoc.plaintext)
        for name in ("empty(", "zeros(", "stats(", "trim(", "pool_free_pages(", "MemoryError", "mpi4py"):
            self.assertIn(name, text)


if __name__ == "__main__":
    unittest.main(verbosity=2)

# SPDX-License-Identifier: BSD-3-Clause
"""The kernel's hugepage pool, set and restored under the pool lock.

Rules it keeps:
 1. Every nr_hugepages file (each page size, each NUMA node) is read once
    the lock is held (Pool()) and written back before it is released
    (Pool.restore(): the nodes' files first, then the pools').
 2. Setting keeps the pages others use: nr_hugepages becomes
    nr - (free - resv) + want, and the answer is what the kernel then
    shows free and unreserved, never what was asked; a count that moved
    meanwhile (a process freeing pages) is set again, TRIES times at most.
 3. No allocation rule here: callers under hugepool's preload are not this
    process (kv::PoolGuard starts it without LD_PRELOAD).
"""
import glob
import time

from holder import say

POOLS = "/sys/kernel/mm/hugepages"
NODES = "/sys/devices/system/node"
TRIES = 3


def read_int(path):
    with open(path) as f:
        return int(f.read())


def write_int(path, value):
    with open(path, "w") as f:
        f.write(f"{value}\n")


def nr_files():
    """Every nr_hugepages file: the nodes' first, then the pools' (restore order)."""
    nodes = sorted(glob.glob(f"{NODES}/node*/hugepages/hugepages-*/nr_hugepages"))
    return nodes + sorted(glob.glob(f"{POOLS}/hugepages-*/nr_hugepages"))


class Pool:
    def __init__(self):
        self.saved = [(path, read_int(path)) for path in nr_files()]

    def restore(self):
        for path, value in self.saved:
            try:
                if read_int(path) != value:
                    write_int(path, value)
            except OSError as e:
                say(f"could not restore {path} to {value}: {e.strerror}")


def page_dir(page_kb):
    return f"{POOLS}/hugepages-{page_kb}kB"


def available(page_kb):
    d = page_dir(page_kb)
    return read_int(f"{d}/free_hugepages") - read_int(f"{d}/resv_hugepages")


def set_free(page_kb, want):
    """Resize the pool so that `want` pages are free and unreserved (pages
    others use are kept); returns what the kernel gave.  A process that
    ends meanwhile (one of the last holder's, exiting after it let the
    lock go) frees its pages into the pool: set again, up to TRIES times."""
    nr = f"{page_dir(page_kb)}/nr_hugepages"
    for _ in range(TRIES):
        try:
            write_int(nr, read_int(nr) - available(page_kb) + want)
        except OSError:
            pass  # the kernel gives fewer or none: the count below says so
        got = available(page_kb)
        if got == want:
            break
        time.sleep(0.05)
    return got


# ---- run and hold ---------------------------------------------------------

# SPDX-License-Identifier: BSD-3-Clause
"""The kernel's view for the Python tests: one /proc/self/smaps field of the
mapping holding an address, /proc/meminfo's free huge pages."""


def smaps(addr):
    """The fields (kB) of the /proc/self/smaps entry that holds addr."""
    fields = {}
    inside = False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(" ", 1)[0]
            if "-" in head and ":" not in head:
                if inside:
                    break
                lo, hi = (int(x, 16) for x in head.split("-"))
                inside = lo <= addr < hi
            elif inside and line.rstrip().endswith(" kB"):
                key, value = line.split(":", 1)
                fields[key] = int(value.split()[0])
    return fields


def on_hugetlb(addr, nbytes):
    """True when addr's mapping is on 2 MB hugetlb pages holding at least nbytes."""
    f = smaps(addr)
    return f.get("KernelPageSize") == 2048 and f.get("Private_Hugetlb", 0) + f.get("Shared_Hugetlb", 0) >= nbytes // 1024


def free_pages():
    """Free 2 MB pages nobody has reserved (HugePages_Free - HugePages_Rsvd)."""
    v = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, value = line.split(":", 1)
            v[key] = int(value.split()[0])
    return v["HugePages_Free"] - v["HugePages_Rsvd"]


def hugetlb_pages():
    """2 MB pages this process maps (/proc/self/status HugetlbPages): unlike
    the pool's free count, other processes on the machine do not move it."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("HugetlbPages:"):
                return int(line.split()[1]) // 2048
    return -1

#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Summarises bench/realloc-run's JSON lines as Markdown tables (stdout)."""
import json
import statistics
import sys

ORDER = ["glibc", "glibc-hugetlb2", "jemalloc", "mimalloc", "mimalloc-large", "libhugetlbfs", "hugepool",
         "hugepool-run"]
LABEL = {"glibc": "glibc", "glibc-hugetlb2": "glibc hugetlb=2", "jemalloc": "jemalloc 5.3",
         "mimalloc": "mimalloc 2.0", "mimalloc-large": "mimalloc, large OS pages",
         "libhugetlbfs": "libhugetlbfs (get_huge_pages + copy)", "hugepool": "hugepool_realloc",
         "hugepool-run": "hugepool-run (preload)"}


def size_name(b):
    return f"{b >> 30} GB" if b >= 1 << 30 else f"{b >> 20} MB"


def size_arg(b):
    """The --to spelling bench/realloc-run names a size by (64M, 2G)."""
    return f"{b >> 30}G" if b >= 1 << 30 and b % (1 << 30) == 0 else f"{b >> 20}M"


def main(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    start = next((r for r in rows if r.get("bench") == "start"), {})
    print(f"Run {start.get('date', '?')}, kernel {start.get('kernel', '?')}, {start.get('nproc', '?')} CPUs, "
          f"load at start {start.get('load', '?')}\n")
    grow = [r for r in rows if r.get("bench") == "realloc" and "median" in r]
    sizes = sorted({r["size"] for r in grow})
    print("| peer | " + " | ".join(f"to {size_name(s)}: ms median [min-max], hugetlb MB" for s in sizes) + " |")
    print("|---" * (len(sizes) + 1) + "|")
    for p in ORDER:
        cells = []
        for s in sizes:
            r = next((x for x in grow if x["peer"] == p and x["size"] == s), None)
            over = next((x for x in rows if x.get("bench") == "realloc" and "over_s" in x
                         and x["skip"] == f"{p} {size_arg(s)}"), None)
            if r is None and over is not None:
                cells.append(f"> {over['over_s'] * 1000} (no run finished)")
            elif r is None:
                cells.append("-")
            elif r.get("over_budget"):
                cells.append(f"{r['median'] / 1e6:.0f} (one run), {r['hugetlb_kb'] // 1024}")
            else:
                cells.append(f"{r['median'] / 1e6:.0f} [{r['min'] / 1e6:.0f}-{r['max'] / 1e6:.0f}] (n={r['n']}), "
                             f"{r['hugetlb_kb'] // 1024}")
        if any(c != "-" for c in cells):
            print(f"| {LABEL.get(p, p)} | " + " | ".join(cells) + " |")
    for r in rows:
        if r.get("bench") == "realloc" and "skip" in r:
            print(f"\nskipped: {r['skip']}: {r['reason']}")
    py = [r for r in rows if r.get("bench") == "realloc-python"]
    if py:
        print("\n| Python bytearray to 512 MB in 1 MB steps | loop ms median [min-max] | process ms median [min-max] |")
        print("|---|---|---|")
        med = {}
        for side in ("plain", "hugepool-run"):
            loop = [r["loop_ns"] / 1e6 for r in py if r["peer"] == side]
            proc = [r["process_ns"] / 1e6 for r in py if r["peer"] == side]
            if not loop:
                continue
            med[side] = (statistics.median(loop), statistics.median(proc))
            print(f"| {side} (n={len(loop)}) | {med[side][0]:.0f} [{min(loop):.0f}-{max(loop):.0f}] | "
                  f"{med[side][1]:.0f} [{min(proc):.0f}-{max(proc):.0f}] |")
        if len(med) == 2:
            print(f"\nhugepool-run / plain: loop {med['hugepool-run'][0] / med['plain'][0]:.2f}x, "
                  f"process {med['hugepool-run'][1] / med['plain'][1]:.2f}x")


if __name__ == "__main__":
    main(sys.argv[1])

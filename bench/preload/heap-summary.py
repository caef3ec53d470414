#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Summary of a bench/preload/heap-run: medians with [min .. max].

usage: heap-summary.py RESULTS_DIR   (reads rows.txt and machine.txt)
rows: churn PEER THREADS REP WALL_MS CPU_MS
      chase PEER 1 REP NS_PER_STEP BUILD_MS HUGETLB_KB HEAP_PCT_ON_HUGETLB PTR
"""
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def fmt(values, digits=1):
    med = statistics.median(values)
    return f"{med:.{digits}f} [{min(values):.{digits}f}..{max(values):.{digits}f}]"


def main():
    d = Path(sys.argv[1])
    print((d / "machine.txt").read_text().strip().replace("\n", "  \n"))
    churn = defaultdict(lambda: ([], []))
    chase = defaultdict(lambda: ([], [], []))
    peers = []
    for line in (d / "rows.txt").read_text().splitlines():
        f = line.split()
        if f[1] not in peers:
            peers.append(f[1])
        if f[0] == "churn":
            churn[(f[1], int(f[2]))][0].append(float(f[4]))
            churn[(f[1], int(f[2]))][1].append(float(f[5]))
        elif f[0] == "chase":
            chase[f[1]][0].append(float(f[4]))
            chase[f[1]][1].append(float(f[5]))
            chase[f[1]][2].append(float(f[7]))
    threads = sorted({t for _, t in churn})
    print("\n### churn: 2,000,000 malloc/free per thread, 16 B-64 KB; wall ms (CPU ms), median [min..max]\n")
    print("| allocator | " + " | ".join(f"{t} thread{'s' if t > 1 else ''}" for t in threads) + " |")
    print("|---|" + "---|" * len(threads))
    for p in peers:
        cells = []
        for t in threads:
            w, c = churn.get((p, t), ([], []))
            cells.append(f"{fmt(w)} ({statistics.median(c):.0f})" if w else "-")
        print(f"| {p} | " + " | ".join(cells) + " |")
    print("\n### chase: 256 MB of 64 B objects, random dependent steps; median [min..max]\n")
    print("| allocator | ns per step | build ms | heap on hugetlb (%) |")
    print("|---|---|---|---|")
    for p in peers:
        if p in chase:
            ns, b, pct = chase[p]
            print(f"| {p} | {fmt(ns)} | {fmt(b, 0)} | {statistics.median(pct):.0f} |")


main()

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Report section of the heap suite (bench/suites/heap): medians with [min .. max].

Reads the suite's rows.txt and machine.txt; rows:
      churn PEER THREADS REP WALL_MS CPU_MS
      chase PEER 1 REP NS_PER_STEP BUILD_MS HUGETLB_KB HEAP_PCT_ON_HUGETLB PTR
"""
import statistics
from collections import defaultdict
from pathlib import Path

from common import Section


def fmt(values, digits=1):
    med = statistics.median(values)
    return f"{med:.{digits}f} [{min(values):.{digits}f}..{max(values):.{digits}f}]"


def summary(d, say):
    say((d / "machine.txt").read_text().strip().replace("\n", "  \n"))
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
    say("\n### churn: 2,000,000 malloc/free per thread, 16 B-64 KB; wall ms (CPU ms), median [min..max]\n")
    say("| allocator | " + " | ".join(f"{t} thread{'s' if t > 1 else ''}" for t in threads) + " |")
    say("|---|" + "---|" * len(threads))
    for p in peers:
        cells = []
        for t in threads:
            w, c = churn.get((p, t), ([], []))
            cells.append(f"{fmt(w)} ({statistics.median(c):.0f})" if w else "-")
        say(f"| {p} | " + " | ".join(cells) + " |")
    say("\n### chase: 256 MB of 64 B objects, random dependent steps; median [min..max]\n")
    say("| allocator | ns per step | build ms | heap on hugetlb (%) |")
    say("|---|---|---|---|")
    for p in peers:
        if p in chase:
            ns, b, pct = chase[p]
            say(f"| {p} | {fmt(ns)} | {fmt(b, 0)} | {statistics.median(pct):.0f} |")



def sections(run, suites):
    d = Path(run.dir(suites[0]))

    def body(md, plots):
        summary(d, lambda text="": md.append(text))
        md.append("")

    return [Section("heap", "The whole heap on huge pages", body, present=lambda: (d / "rows.txt").exists(),
                    intro="Each allocator runs `hugepool_bench_smallalloc` (each thread replaces one of 1,024 live "
                          "blocks of 16 B-64 KB, log-uniform, 2,000,000 times) with 1, 2 and all CPUs' threads, and "
                          "`hugepool_bench_chase` (256 MB of 64 B objects linked into one random cycle, 5,000,000 "
                          "dependent steps); repetitions interleaved, allocators in a rotated order. Heap on hugetlb: "
                          "the process's Private_Hugetlb over the heap's 256 MB.")]

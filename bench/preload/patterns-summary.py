#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Summary of bench/preload/patterns-run: patterns-summary.py RESULTS_DIR.

Medians over every round of every repetition, with [min-max]."""
import collections
import statistics
import sys


def fmt(xs):
    return f"{statistics.median(xs):.1f} [{min(xs):.1f}-{max(xs):.1f}]" if xs else "-"


def fmt_ms(xs):
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]" if xs else "-"


def main():
    d = sys.argv[1]
    pairs = collections.defaultdict(list)
    drift = collections.defaultdict(list)
    peers = []
    for line in open(f"{d}/rows.txt"):
        f = line.split()
        peer = f[0]
        if peer not in peers:
            peers.append(peer)
        if f[3] == "threads":
            pairs[(peer, int(f[4]), "wall")].append(float(f[10]))
            pairs[(peer, int(f[4]), "cpu")].append(float(f[12]))
        elif f[3] == "drift":
            drift[(peer, "malloc", "wall")].append(float(f[7]))
            drift[(peer, "hand", "wall")].append(float(f[9]))
            drift[(peer, "malloc", "cpu")].append(float(f[11]))
            drift[(peer, "hand", "cpu")].append(float(f[13]))
    print(open(f"{d}/machine.txt").read())
    for clock in ("cpu", "wall"):
        what = "thread CPU time" if clock == "cpu" else "wall time"
        print(f"### Threads: malloc + touch (first and last byte) + free of 4 MB, ns per pair per thread ({what})")
        print()
        print("| allocator | 1 thread | 2 threads | 2 / 1 (medians) |")
        print("|---|---|---|---|")
        for p in peers:
            one, two = pairs[(p, 1, clock)], pairs[(p, 2, clock)]
            ratio = statistics.median(two) / statistics.median(one) if one and two else float("nan")
            print(f"| {p} | {fmt(one)} | {fmt(two)} | {ratio:.2f}x |")
        print()
    for clock in ("cpu", "wall"):
        what = "process CPU time" if clock == "cpu" else "wall time"
        print(f"### Drifting sizes: two buffers of 30..36 MB (7 lengths in turn) malloc + memset + free, ms per call ({what})")
        print()
        print("| allocator | malloc per call | reused by hand (floor) | malloc / hand (medians) |")
        print("|---|---|---|---|")
        for p in peers:
            m, h = drift[(p, "malloc", clock)], drift[(p, "hand", clock)]
            ratio = statistics.median(m) / statistics.median(h) if m and h else float("nan")
            print(f"| {p} | {fmt_ms(m)} | {fmt_ms(h)} | {ratio:.2f}x |")
        print()


main()

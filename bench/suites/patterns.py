#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Report section of the patterns suite (bench/suites/patterns): medians over every round of every
repetition, with [min-max], from the suite's rows.txt and machine.txt."""
import collections
import os
import statistics

from common import Section


def fmt(xs):
    return f"{statistics.median(xs):.1f} [{min(xs):.1f}-{max(xs):.1f}]" if xs else "-"


def fmt_ms(xs):
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]" if xs else "-"


def summary(d, say):
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
    say(open(f"{d}/machine.txt").read().strip().replace("\n", "  \n") + "\n")
    for clock in ("cpu", "wall"):
        what = "thread CPU time" if clock == "cpu" else "wall time"
        say(f"### Threads: malloc + touch (first and last byte) + free of 4 MB, ns per pair per thread ({what})")
        say()
        say("| allocator | 1 thread | 2 threads | 2 / 1 (medians) |")
        say("|---|---|---|---|")
        for p in peers:
            one, two = pairs[(p, 1, clock)], pairs[(p, 2, clock)]
            ratio = statistics.median(two) / statistics.median(one) if one and two else float("nan")
            say(f"| {p} | {fmt(one)} | {fmt(two)} | {ratio:.2f}x |")
        say()
    for clock in ("cpu", "wall"):
        what = "process CPU time" if clock == "cpu" else "wall time"
        say(f"### Drifting sizes: two buffers of 30..36 MB (7 lengths in turn) malloc + memset + free, ms per call ({what})")
        say()
        say("| allocator | malloc per call | reused by hand (floor) | malloc / hand (medians) |")
        say("|---|---|---|---|")
        for p in peers:
            m, h = drift[(p, "malloc", clock)], drift[(p, "hand", clock)]
            ratio = statistics.median(m) / statistics.median(h) if m and h else float("nan")
            say(f"| {p} | {fmt_ms(m)} | {fmt_ms(h)} | {ratio:.2f}x |")
        say()



def sections(run, suites):
    d = run.dir(suites[0])

    def body(md, plots):
        summary(d, lambda text="": md.append(text))

    return [Section("patterns", "Threads and drifting sizes", body,
                    present=lambda: os.path.exists(os.path.join(d, "rows.txt")),
                    intro="`hugepool_bench_patterns` under glibc, glibc `hugetlb=2` and `hugepool-run` (\"-2ranks\": "
                          "as one of two ranks on the node, `MPI_LOCALNRANKS=2`); *threads*: each thread loops "
                          "malloc(4 MB), writes its first and last byte, frees; *drift*: two buffers of 30..36 MB "
                          "malloc'd, written and freed per call, against two 36 MB buffers reused by hand.")]

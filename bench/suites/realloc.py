#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Report section of the realloc suite (bench/suites/realloc): one buffer grown by realloc, every peer, and
the Python bytearray, as Markdown tables."""
import statistics

from common import Section

ORDER = ["glibc", "glibc-hugetlb2", "jemalloc", "mimalloc", "mimalloc-large", "libhugetlbfs", "hugepool",
         "hugepool-run"]
LABEL = {"glibc": "glibc", "glibc-hugetlb2": "glibc hugetlb=2", "jemalloc": "jemalloc 5.3",
         "mimalloc": "mimalloc 2.0", "mimalloc-large": "mimalloc, large OS pages",
         "libhugetlbfs": "libhugetlbfs (get_huge_pages + copy)", "hugepool": "hugepool_realloc",
         "hugepool-run": "hugepool-run (preload)"}


def size_name(b):
    return f"{b >> 30} GB" if b >= 1 << 30 else f"{b >> 20} MB"


def size_arg(b):
    """The --to spelling bench/suites/realloc names a size by (64M, 2G)."""
    return f"{b >> 30}G" if b >= 1 << 30 and b % (1 << 30) == 0 else f"{b >> 20}M"


def summary(rows, say):
    start = next((r for r in rows if r.get("bench") == "start"), {})
    say(f"Run {start.get('date', '?')}, kernel {start.get('kernel', '?')}, {start.get('nproc', '?')} CPUs, "
        f"load at start {start.get('load', '?')}\n")
    grow = [r for r in rows if r.get("bench") == "realloc" and "median" in r]
    sizes = sorted({r["size"] for r in grow})
    say("| peer | " + " | ".join(f"to {size_name(s)}: ms median [min-max], hugetlb MB" for s in sizes) + " |")
    say("|---" * (len(sizes) + 1) + "|")
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
            say(f"| {LABEL.get(p, p)} | " + " | ".join(cells) + " |")
    for r in rows:
        if r.get("bench") == "realloc" and "skip" in r:
            say(f"\nskipped: {r['skip']}: {r['reason']}")
    py = [r for r in rows if r.get("bench") == "realloc-python"]
    if py:
        say("\n| Python bytearray to 512 MB in 1 MB steps | loop ms median [min-max] | process ms median [min-max] |")
        say("|---|---|---|")
        med = {}
        for side in ("plain", "hugepool-run"):
            loop = [r["loop_ns"] / 1e6 for r in py if r["peer"] == side]
            proc = [r["process_ns"] / 1e6 for r in py if r["peer"] == side]
            if not loop:
                continue
            med[side] = (statistics.median(loop), statistics.median(proc))
            say(f"| {side} (n={len(loop)}) | {med[side][0]:.0f} [{min(loop):.0f}-{max(loop):.0f}] | "
                f"{med[side][1]:.0f} [{min(proc):.0f}-{max(proc):.0f}] |")
        if len(med) == 2:
            say(f"\nhugepool-run / plain: loop {med['hugepool-run'][0] / med['plain'][0]:.2f}x, "
                f"process {med['hugepool-run'][1] / med['plain'][1]:.2f}x")


def sections(run, suites):
    rows = run.lines(*suites)

    def body(md, plots):
        summary(rows, lambda text="": md.append(text))
        md.append("")

    return [Section("realloc", "Growth by realloc", body, present=lambda: bool(rows),
                    intro="One buffer grown from 1 MB in 1 MB steps, each step writing the bytes it added, then "
                          "freed; median [min-max] over the timed runs after one warm-up, and the hugetlb MB the "
                          "kernel's smaps showed behind the buffer at its largest. Peers on hugetlb pages run with a "
                          "pool of 1.25 x the size (2 x for libhugetlbfs, whose copy needs old and new pages).")]

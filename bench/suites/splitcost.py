#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Report section of the splitcost suite (bench/suites/splitcost): one row a writer count and run, one
column a configuration, each cell the median of a run's 200 calls [min .. max over them], in us."""
import os
import re

from common import Section

LINE = re.compile(r"(\S+) (\d+) (\d+) .*median ([\d.]+) us \[([\d.]+) \.\. ([\d.]+)\]")
ORDER = ["plain", "preload", "preload-old"]


def cells(path):
    """{(writers, rep): {config: cell}}"""
    out = {}
    for line in open(path):
        m = LINE.match(line)
        if m:
            config, writers, rep, med, lo, hi = m.groups()
            out.setdefault((int(writers), int(rep)), {})[config] = f"{float(med):.1f} [{lo} .. {hi}]"
    return out


def body(d, md):
    with open(os.path.join(d, "machine.txt")) as f:
        md.append(f.read().strip().replace("\n", "  \n"))
    md.append("")
    data = cells(os.path.join(d, "rows.txt"))
    configs = [c for c in ORDER if any(c in v for v in data.values())]
    md.append("| writers | run | " + " | ".join(configs) + " |")
    md.append("|---" * (len(configs) + 2) + "|")
    for (writers, rep), v in sorted(data.items()):
        md.append(f"| {writers} | {rep} | " + " | ".join(v.get(c, "-") for c in configs) + " |")
    md.append("")


def sections(run, suites):
    d = run.dir(suites[0])
    return [Section("splitcost", "The cost of a guard page: a 2 MB page split", lambda md, plots: body(d, md),
                    present=lambda: os.path.exists(os.path.join(d, "rows.txt")),
                    intro="`hugepool_bench_splitcost 200 {0,4}`: 200 `mprotect(PROT_NONE)` calls of 4 KB inside a "
                          "2 MB page of an 8 MB malloc'd buffer that is still whole (50 buffers, one guard page in "
                          "each of their four 2 MB pages), with 0 or 4 threads storing into the buffer meanwhile; "
                          "plain glibc (the system call) and under the preload (the page is split into 4 KB pages). "
                          "Median of the 200 calls per run [min .. max over the 200], us.")]

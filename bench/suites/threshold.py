#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Report section of the threshold suite (bench/suites/threshold): its table, as the runner wrote it."""
import os

from common import Section


def sections(run, suites):
    path = os.path.join(run.dir(suites[0]), "table.md")

    def body(md, plots):
        with open(path) as f:
            md += f.read().splitlines() + [""]

    return [Section("threshold", "Threshold cost in pool pages", body, present=lambda: os.path.exists(path),
                    intro="Real programs under `hugepool-run -t T --stats=json`: requests that went to hugepool, the "
                          "peak bytes hugepool mapped (pool pages taken, its cache included), the kernel's "
                          "`Private_Hugetlb` at exit, and wall time of one run. `python` keeps ~40 live bytearrays "
                          "of 64 KiB-1 MiB over 3000 allocations; `sqlite3` builds and sorts a 200,000-row table; "
                          "`gcc -O1 -c` compiles a generated 3 MB file; `sort -S 64M` a 10 MB file.")]

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Report section of the threshold suite (bench/suites/threshold): its table, as the runner wrote it."""
from common import file_section


def sections(run, suites):
    return [file_section(run, suites[0], "Threshold cost in pool pages", "table.md",
                         intro="Real programs under `hugepool-run -t T --stats=json`: requests that went to hugepool, the "
                               "peak bytes hugepool mapped (pool pages taken, its cache included), the kernel's "
                               "`Private_Hugetlb` at exit, and wall time of one run. `python` keeps ~40 live bytearrays "
                               "of 64 KiB-1 MiB over 3000 allocations; `sqlite3` builds and sorts a 200,000-row table; "
                               "`gcc -O1 -c` compiles a generated 3 MB file; `sort -S 64M` a 10 MB file.")]

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Report section of the programs suite (bench/suites/programs): its summary, as the runner wrote it."""
import os

from common import Section


def sections(run, suites):
    path = os.path.join(run.dir(suites[0]), "summary.md")

    def body(md, plots):
        with open(path) as f:
            md += f.read().splitlines() + [""]

    return [Section("programs", "Everyday programs under the preload", body, present=lambda: os.path.exists(path),
                    intro="gawk, tclsh, ruby, sqlite3, `import torch` and the HPC Challenge suite, plain, under "
                          "`hugepool-run` and `--small-heap`, interleaved, with a roomy and a tight pool: medians "
                          "[min..max] of wall time, CPU against plain, minor faults; every output compared with plain.")]

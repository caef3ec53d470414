#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Report section of the programs suite (bench/suites/programs): its summary, as the runner wrote it."""
from common import file_section


def sections(run, suites):
    return [file_section(run, suites[0], "Everyday programs under the preload", "summary.md",
                         intro="gawk, tclsh, ruby, sqlite3, `import torch`, GNU sort, bash loops of short processes and the HPC "
                               "Challenge suite, plain, "
                               "under `hugepool-run` and `--small-heap`, interleaved, with a roomy and a tight pool: "
                               "medians [min..max] of wall time, CPU against plain, minor faults, pool pages held "
                               "against the pages plain touched; every output compared with plain.")]

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Report section of the gpu suite (bench/suites/gpu): what the benchmark printed, its target lines included."""
import os

from common import Section


def sections(run, suites):
    path = os.path.join(run.dir(suites[0]), "gpu.txt")

    def body(md, plots):
        with open(path) as f:
            md += ["```"] + f.read().splitlines() + ["```", ""]

    return [Section("gpu", "GPU host registration", body, present=lambda: os.path.exists(path),
                    intro="`hugepool-bench-gpu` over `cuMemHostRegister`/`cuMemHostUnregister` of touched buffers "
                          "(4 KB pages, THP, hugetlb 2 MB and 1 GB, `hugepool_alloc`), `cuMemHostAlloc` against "
                          "`hugepool_alloc_registered` (first use and cache hit), copy rates registered and not, the "
                          "256 MB register/copy/unregister loop plain and under `hugepool-run --cuda`, and PyTorch's "
                          "`pin_memory()`; each target's PASS or FAIL at the end. Medians with min/max, ms per GB.")]

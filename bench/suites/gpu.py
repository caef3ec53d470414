#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Report section of the gpu suite (bench/suites/gpu): what the benchmark printed, its target lines included."""
from common import file_section


def sections(run, suites):
    return [file_section(run, suites[0], "GPU host registration", "gpu.txt", fenced=True,
                         intro="`hugepool-bench-gpu` over `cuMemHostRegister`/`cuMemHostUnregister` of touched buffers "
                               "(4 KB pages, THP, hugetlb 2 MB and 1 GB, `hugepool_alloc`), `cuMemHostAlloc` against "
                               "`hugepool_alloc_registered` (first use and cache hit), copy rates registered and not, the "
                               "256 MB register/copy/unregister loop plain and under `hugepool-run --cuda`, and PyTorch's "
                               "`pin_memory()`; each target's PASS or FAIL at the end. Medians with min/max, ms per GB.")]

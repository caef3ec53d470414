#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Report section of the python suite (bench/mpi4py_bench.py, run by bench/suites/python): mpi4py
ping-pong and Allreduce on numpy.empty against hugepool.empty arrays, median (min-max) over the rounds."""
from common import Section


def tables(rows):
    d = {(r["MiB"], r["mode"], r["alloc"], r["metric"]): r for r in rows}
    sizes = sorted({r["MiB"] for r in rows})
    out = []
    for metric, title, unit in (("pingpong_GBps", "Ping-pong", "GB/s, higher is better"),
                                ("allreduce_ms", "Allreduce", "ms per call, lower is better")):
        for mode in ("reused", "fresh"):
            out += [f"\n{title}, {mode} buffers ({unit}):\n", "| MiB | numpy.empty | hugepool.empty | hugepool gain |",
                    "|---:|---:|---:|---:|"]
            for mib in sizes:
                n, h = d.get((mib, mode, "numpy", metric)), d.get((mib, mode, "hugepool", metric))
                if not (n and h):
                    continue
                gain = h["median"] / n["median"] if metric.endswith("GBps") else n["median"] / h["median"]
                out.append(f"| {mib} | {cell(n)} | {cell(h)} | {gain:.2f}x |")
    return out


def cell(r):
    return f"{r['median']:.2f} ({r['min']:.2f}-{r['max']:.2f})"


def sections(run, suites):
    rows = [r for r in run.lines(*suites) if "MiB" in r]

    def body(md, plots):
        md += tables(rows) + [""]

    return [Section("python", "Python: mpi4py on numpy.empty against hugepool.empty", body, present=lambda: bool(rows),
                    intro="mpi4py under Open MPI's `mpirun.openmpi -n 2`, the allocators' order swapped every "
                          "round; ping-pong is GB/s counting both directions, Allreduce (float64 SUM, out of place) "
                          "is ms per call. *reused*: the arrays are allocated once per size; *fresh*: every "
                          "iteration allocates its arrays, writes them and drops them.")]

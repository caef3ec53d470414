#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Report section of the mpi suite (hugepool-bench-mpi under MPICH, run by bench/suites/regcost): ping-pong,
4-D halo exchange and ring allreduce on memalign, hugetlb and hugepool buffers."""
from common import MIB, Results, Section, fmt, fmt_time, ordered, plot_lines, rate_cell, shows, size_name, table, time_cell


def section_mpi(R, md, plots, cost):
    tlss = ordered(R.values("tls", bench="mpi"), ["default", "posix,self"])
    mems = ordered(R.values("mem", bench="mpi"), ["memalign", "hugetlb", "hugepool"])
    sizes = sorted(R.values("size", bench="mpi", test="pingpong"))
    kinds = []
    for m in mems:
        ks = sorted({r.get("page_kb") for r in R.find(bench="mpi", test="pingpong", mem=m)} - {None})
        if ks:
            kinds.append(f"{m} {'/'.join(str(k) for k in ks)} kB")
    if kinds:
        md.append("Page size the kernel reports for each buffer (smaps KernelPageSize, rank 0): " + ", ".join(kinds) + ".")
        md.append("")
    if sizes:
        md.append("### Ping-pong: bandwidth in GB/s (median [min–max]); latency for the smallest size")
        md.append("")
        out = []
        for size in sizes:
            row = [size_name(size)]
            for t in tlss:
                for m in mems:
                    r = R.one(bench="mpi", test="pingpong", tls=t, mem=m, size=size)
                    if not r:
                        row.append("–")
                    elif size <= 4096:
                        row.append(f"{fmt(r['median'])} µs")
                    else:
                        row.append(rate_cell(size, r, per_ns=1e3))
            out.append(row)
        md += table(["size"] + [f"{m} ({t})" for t in tlss for m in mems], out)
        md.append("")
        series = []
        for t in tlss:
            for m in mems:
                pts = [(r["size"], r["size"] / (r["median"] * 1e3), r["size"] / (r["max"] * 1e3),
                        r["size"] / (r["min"] * 1e3)) for r in R.find(bench="mpi", test="pingpong", tls=t, mem=m)]
                series.append((f"{m}, {t}", pts))
        png = plot_lines(plots, "mpi_pingpong_bandwidth.png", "MPI ping-pong bandwidth vs message size",
                         "message size (bytes)", "GB/s", series, logy=True)
        if png:
            md.append(f"![MPI ping-pong bandwidth]({png})")
            md.append("")
    for test, title in (("halo_sequential", "Halo exchange, one dimension at a time"),
                        ("halo_concurrent", "Halo exchange, all eight faces at once")):
        fs = sorted(R.values("size", bench="mpi", test=test))
        if not fs:
            continue
        dims = next((r.get("dims") for r in R.find(bench="mpi", test=test)), "?")
        md.append(f"### {title} (4-D periodic grid {dims}; per exchange, GB/s = 8 faces sent per rank)")
        md.append("")
        out = []
        for size in fs:
            row = [size_name(size)]
            for t in tlss:
                for m in mems:
                    r = R.one(bench="mpi", test=test, tls=t, mem=m, size=size)
                    row.append(f"{fmt_time(r['median'] * 1e3)} ({fmt(8 * size / (r['median'] * 1e3))} GB/s)" if r else "–")
            out.append(row)
        md += table(["face"] + [f"{m} ({t})" for t in tlss for m in mems], out)
        md.append("")
    ars = sorted(R.values("size", bench="mpi", test="allreduce_alloc"))
    if ars:
        md.append("### Ring allreduce: time per call, work buffers allocated per call vs reused")
        md.append("")
        out = []
        cols = [(t, m) for t in ("allreduce_alloc", "allreduce_reuse") for m in mems
                if R.find(bench="mpi", test=t, mem=m)]
        for size in ars:
            for t in tlss:
                row = [size_name(size), t]
                for test, m in cols:
                    r = R.one(bench="mpi", test=test, tls=t, mem=m, size=size)
                    row.append(time_cell(r, 1e3) if r else "–")
                out.append(row)
        md += table(["vector", "tls"] + [f"{'allocated per call' if 'alloc' in t else 'reused'}: {m}"
                                         for t, m in cols], out)
        md.append("")
    findings = []
    if sizes:
        for big in [s for s in sizes if s >= MIB][-2:]:
            for t in tlss:
                a = R.one(bench="mpi", test="pingpong", tls=t, mem="memalign", size=big)
                for m in ("hugetlb", "hugepool"):
                    b = R.one(bench="mpi", test="pingpong", tls=t, mem=m, size=big)
                    if a and b:
                        findings.append(f"ping-pong {size_name(big)} ({t}): {m} {fmt(big / (b['median'] * 1e3))} GB/s "
                                        f"vs memalign {fmt(big / (a['median'] * 1e3))} GB/s "
                                        f"({fmt(a['median'] / b['median'], 2)}×).")
    for size in ars[-1:]:
        for t in tlss:
            a = R.one(bench="mpi", test="allreduce_alloc", tls=t, mem="memalign", size=size)
            b = R.one(bench="mpi", test="allreduce_alloc", tls=t, mem="hugepool", size=size)
            c = R.one(bench="mpi", test="allreduce_reuse", tls=t, mem="memalign", size=size)
            if a and b:
                findings.append(f"allreduce {size_name(size)} allocating per call ({t}): hugepool "
                                f"{fmt_time(b['median'] * 1e3)}, memalign {fmt_time(a['median'] * 1e3)}"
                                + (f", memalign reused {fmt_time(c['median'] * 1e3)}." if c else "."))
    shows(md, findings)


def sections(run, suites):
    R = Results(run.lines(*suites))
    return [Section("mpi", "MPI (MPICH, 2 ranks bound to cores)", lambda md, plots: section_mpi(R, md, plots, None),
                    present=lambda: bool(R.find(bench="mpi")),
                    intro="Buffers from posix_memalign (4 KB pages), mmap MAP_HUGETLB (hugetlb), and hugepool_alloc. "
                          "*default* = UCX's default transports (large messages take the CMA single-copy path); "
                          "*posix,self* = UCX_TLS=posix,self, copy through shared memory: the control. All MPI runs "
                          "set UCX_MEM_MALLOC_HOOKS=n UCX_MEM_MALLOC_RELOC=n (needed with a caching allocator).")]

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Report section of the preload suite: one JSON line per measured row, and the summary tables.

bench/suites/preload writes each program's output to the suite's raw/ as <bench>.<config>.<rep> (plus
machine.txt); the first report of the run turns them into the suite's results.jsonl, which keeps every
row of every repetition: the summary gives the median of the per-run medians [min..max of them], and
other statistics (e.g. the best per-run median) can be computed from the same file.
"""
import glob
import json
import os
import re
import statistics as st

from common import Section

# Programs whose output has no "# column ..." header line.
FIXED_COLUMNS = {"smallalloc": ["wall_ms", "cpu_ms"]}
FORKCOST = re.compile(r"(\d+) MiB live: fork\+exit\+wait median ([\d.]+) ms \[([\d.]+) \.\. ([\d.]+)\]")


def number(text):
    return int(text) if re.fullmatch(r"-?\d+", text) else float(text)


def rows_of_output(bench, text):
    if bench == "forkcost":
        return [{"live_mib": int(m[0]), "median_ms": float(m[1]), "min_ms": float(m[2]), "max_ms": float(m[3])}
                for m in FORKCOST.findall(text)]
    columns = FIXED_COLUMNS.get(bench)
    rows = []
    for line in text.splitlines():
        if line.startswith("#"):
            columns = line[1:].split()
        elif line.strip():
            rows.append(dict(zip(columns, map(number, line.split()))))
    return rows


def collect(raw):
    """RAW's machine.txt and <bench>.<config>.<rep> files as JSON rows."""
    machine = {"bench": "machine"}
    with open(os.path.join(raw, "machine.txt")) as f:
        for line in f:
            key, _, value = line.rstrip("\n").partition(": ")
            machine[key] = value
    out = [machine]
    for path in sorted(glob.glob(os.path.join(raw, "*.*.*"))):
        bench, config, rep = os.path.basename(path).split(".", 2)
        if not rep.isdigit():
            continue
        with open(path) as f:
            for row in rows_of_output(bench, f.read()):
                out.append({"bench": bench, "config": config, "rep": int(rep), **row})
    return out


def cell(vals, fmt="{:.0f}"):
    return f"{fmt.format(st.median(vals))} [{fmt.format(min(vals))}..{fmt.format(max(vals))}]"


def summarise(rows):
    def runs(bench, config, key, value):
        """{key as text: [value of every repetition]}, keys in the order they were measured."""
        res = {}
        for r in rows:
            if r["bench"] == bench and r["config"] == config:
                res.setdefault(str(r[key]), []).append(float(r[value]))
        return res

    def column(bench, config, value):
        return [float(r[value]) for r in rows if r["bench"] == bench and r["config"] == config]

    machine = next(r for r in rows if r["bench"] == "machine")
    lines = ["\n".join(f"{k}: {v}" for k, v in machine.items() if k != "bench"), ""]
    cfgs = ["plain", "hugepool", "hugepool-64K", "glibc-hugetlb", "hand", "plain-posix", "hugepool-posix"]
    data = {c: runs("pingpong", c, "bytes", "median_us") for c in cfgs}
    lines.append("### MPI ping-pong, round trip in us: median of the per-run medians [min..max of them]; "
                 "MB/s from the median")
    lines.append("| bytes | " + " | ".join(cfgs) + " | hugepool / plain | hugepool / hand |")
    lines.append("|---" * (len(cfgs) + 3) + "|")
    for size in data["plain"]:
        med = {c: st.median(data[c][size]) for c in cfgs if size in data[c]}
        row = [size] + [f"{cell(data[c][size], '{:.1f}')} ({2*int(size)/med[c]:.0f} MB/s)" if size in data[c] else "-"
                        for c in cfgs]
        row.append(f"{med['plain']/med['hugepool']:.2f}x")
        row.append(f"{med['hugepool']/med['hand']:.2f}")
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines.append("### Gradient allreduce (ring, buffers malloc'ed per call), ms per call")
    ar = {c: runs("allreduce", c, "gradient_MiB", "median_ms") for c in ["plain", "hugepool", "glibc-hugetlb"]}
    lines.append("| gradient MiB | plain | hugepool-run | glibc hugetlb=2 | hugepool speed-up vs plain |")
    lines.append("|---|---|---|---|---|")
    for size in ar["plain"]:
        cells = [cell(ar[c][size], "{:.2f}") if size in ar[c] else "-" for c in ar]
        lines.append(f"| {size} | " + " | ".join(cells) +
                     f" | {st.median(ar['plain'][size])/st.median(ar['hugepool'][size]):.2f}x |")
    lines.append("")
    lines.append("### Small allocations, 8 threads x 1e6 steps, 16 B..64 KB: wall and CPU ms, median [min..max]")
    sa = {c: column("smallalloc", c, "wall_ms") for c in ["plain", "hugepool", "small-heap"]}
    cpu = {c: column("smallalloc", c, "cpu_ms") for c in ["plain", "hugepool", "small-heap"]}
    lines.append("| configuration | wall ms | vs plain | CPU ms | vs plain |")
    lines.append("|---|---|---|---|---|")
    for c in sa:
        lines.append(f"| {c} | {cell(sa[c], '{:.1f}')} | {100*(st.median(sa[c])/st.median(sa['plain'])-1):+.1f}% | "
                     f"{cell(cpu[c], '{:.1f}')} | {100*(st.median(cpu[c])/st.median(cpu['plain'])-1):+.1f}% |")
    lines.append("")
    lines.append("### fork() with 256 MiB live: fork + child _exit + waitpid, ms (median of 7 per process)")
    lines.append("| configuration | ms |")
    lines.append("|---|---|")
    for c in ["plain", "copy", "keep"]:
        v = column("forkcost", c, "median_ms")
        if v:
            lines.append(f"| {c} | {cell(v, '{:.2f}')} |")
    return "\n".join(lines) + "\n"


def results(d):
    """The suite's rows: results.jsonl, written from raw/ the first time."""
    jsonl = os.path.join(d, "results.jsonl")
    if not os.path.exists(jsonl) and os.path.exists(os.path.join(d, "raw", "machine.txt")):
        with open(jsonl, "w") as f:
            for row in collect(os.path.join(d, "raw")):
                f.write(json.dumps(row) + "\n")
    if not os.path.exists(jsonl):
        return []
    with open(jsonl) as f:
        return [json.loads(line) for line in f if line.strip()]


def sections(run, suites):
    rows = results(run.dir(suites[0]))

    def body(md, plots):
        md.append(summarise(rows))

    return [Section("preload", "Unmodified MPI programs under hugepool-run", body,
                    present=lambda: any(r["bench"] == "pingpong" for r in rows),
                    intro="Configurations: `plain` = the binary as is; `hugepool` = `hugepool-run` (threshold 1M); "
                          "`hugepool-64K` = `hugepool-run -t 64K`; `glibc-hugetlb` = "
                          "`GLIBC_TUNABLES=glibc.malloc.hugetlb=2`; `hand` = `--hand`, buffers mapped with "
                          "`MAP_HUGETLB` by hand; `*-posix` = `UCX_TLS=posix,self` (copy through shared memory "
                          "instead of CMA: the control). The ping-pong allocates its buffer once per size and "
                          "reuses it; the allreduce allocates its buffers on every call. Every configuration runs "
                          "REPS times, interleaved; cells are the median of the per-run medians [min..max of them].")]

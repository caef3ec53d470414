#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Report section of the cluster suite (bench/suites/cluster): Markdown tables, each cell the
median [min-max] over every round (and every repetition within a round)."""
import glob
import json
import os
import re
import statistics

from common import Section


def cell(values, fmt="{:.1f}"):
    if not values:
        return "-"
    return f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}-{fmt.format(max(values))}]"


def size_name(b):
    for unit, shift in (("GB", 30), ("MB", 20), ("KB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return f"{b >> shift} {unit}"
    return f"{b} B"


def win_table(path):
    rows = {}
    bad = 0
    pages = {}
    for line in open(path):
        rec = json.loads(line)
        bad += rec["bad"]
        if "page_kb" in rec:
            pages.setdefault(rec["config"], set()).add(rec["page_kb"])
        r = rows.setdefault(rec["size"], {})
        for key in ("create_ms", "free_ms", "touch_ms"):
            r.setdefault((rec["config"], key), []).extend(rec[key])
    kinds = "; ".join(f"{c}: {'/'.join(str(k) for k in sorted(v))} kB" for c, v in sorted(pages.items()))
    out = []
    # Each MPI's own windows against hugepool-run --mpi-win-shared under that MPI.
    for mpi, own, hp in (("MPICH", "mpich", "hugepool"), ("Open MPI", "openmpi", "openmpi-hugepool")):
        if not any((own, "create_ms") in r for r in rows.values()):
            continue
        out += win_rows(rows, mpi, own, hp)
    out += [f"(windows whose peer's bytes read back wrong: {bad}; "
            f"the windows' page size in smaps, {kinds or 'not recorded'})", ""]
    return out


def win_rows(rows, mpi, own, hp):
    """One table: `mpi`'s own windows (config `own`) against hugepool's (`hp`)."""
    out = [f"### MPI_Win_allocate_shared per node under {mpi}, 2 ranks, ms: median [min-max]", "",
           f"| window (node total) | create, {mpi} | create, hugepool | free, {mpi} | free, hugepool "
           f"| first write, {mpi} | first write, hugepool |",
           "|---|---|---|---|---|---|---|"]
    fmt = "{:.2f}"
    for size in sorted(rows):
        r = rows[size]
        out.append(f"| {size_name(size)} | " + " | ".join(
            cell(r.get((c, k), []), fmt) for k in ("create_ms", "free_ms", "touch_ms") for c in (own, hp))
            + " |")
    n = len(next(iter(rows.values())).get((own, "create_ms"), [])) if rows else 0
    return out + ["", f"({n} samples a cell)", ""]


def parse_imb(path):
    """{bench: {bytes: value}}: PingPong Mbytes/sec, others t_avg usec."""
    res, bench = {}, None
    for line in open(path, errors="replace"):
        m = re.match(r"# Benchmarking (\S+)", line)
        if m:
            bench = m.group(1)
            continue
        f = line.split()
        if bench and len(f) >= 4 and f[0].isdigit() and f[1].isdigit():
            nums = [float(x) for x in f[2:]]
            res.setdefault(bench, {})[int(f[0])] = nums[1] if bench == "PingPong" else nums[2]
    return res


def parse_osu(path):
    res = {}
    for line in open(path, errors="replace"):
        f = line.split()
        if len(f) >= 2 and f[0].isdigit():
            res[int(f[0])] = float(f[1])
    return res


def bed_tables(d):
    configs = ("plain", "hugetlb2", "hugepool")
    names = {"plain": "plain malloc", "hugetlb2": "glibc hugetlb=2", "hugepool": "hugepool-run"}
    data = {}  # (what, size) -> config -> [values]
    loads = []
    for rd in sorted(glob.glob(os.path.join(d, "bed", "r*-*"))):
        cfg = rd.rsplit("-", 1)[1]
        if os.path.exists(os.path.join(rd, "load")):
            loads.append(float(open(os.path.join(rd, "load")).read()))
        if os.path.exists(os.path.join(rd, "imb")):
            for bench, vals in parse_imb(os.path.join(rd, "imb")).items():
                for size, v in vals.items():
                    data.setdefault((f"IMB {bench}", size), {}).setdefault(cfg, []).append(v)
        for what in ("osu_latency", "osu_bw"):
            p = os.path.join(rd, what)
            if os.path.exists(p):
                for size, v in parse_osu(p).items():
                    data.setdefault((what, size), {}).setdefault(cfg, []).append(v)
    units = {"IMB PingPong": "MB/s", "IMB Allreduce": "t_avg us", "osu_latency": "us", "osu_bw": "MB/s"}
    out = []
    for what in ("IMB PingPong", "IMB Allreduce", "osu_latency", "osu_bw"):
        sizes = sorted(s for (w, s) in data if w == what and s >= 65536)
        if not sizes:
            continue
        out += [f"### {what} between 2 nodes ({units[what]}), median [min-max]", "",
                "| size | " + " | ".join(names[c] for c in configs) + " | hugepool / plain |",
                "|---|---|---|---|---|"]
        for s in sizes:
            r = data[(what, s)]
            ratio = "-"
            if r.get("plain") and r.get("hugepool"):
                ratio = f"{statistics.median(r['hugepool']) / statistics.median(r['plain']):.2f}"
            out.append(f"| {size_name(s)} | " + " | ".join(cell(r.get(c, [])) for c in configs) + f" | {ratio} |")
        out.append("")
    if loads:
        out.append(f"(load average at the start of each run: {min(loads):.1f}-{max(loads):.1f} on 2 CPUs)")
    return out


def summary(d):
    lines = []
    if os.path.exists(os.path.join(d, "info")):
        lines += ["```", open(os.path.join(d, "info")).read().rstrip(), "```", ""]
    if os.path.exists(os.path.join(d, "win.jsonl")):
        lines += win_table(os.path.join(d, "win.jsonl"))
    if os.path.isdir(os.path.join(d, "bed")):
        lines += bed_tables(d)
    return lines


def sections(run, suites):
    d = run.dir(suites[0])

    def present():
        return os.path.exists(os.path.join(d, "win.jsonl")) or os.path.isdir(os.path.join(d, "bed"))

    return [Section("cluster", "Across simulated nodes: window creation per node and the bed's MPI runs",
                    lambda md, plots: md.extend(summary(d)), present=present,
                    intro="*win*: `MPI_Win_allocate_shared` create / free / first write per node, 2 ranks, each "
                          "MPI's own windows against `hugepool-run --mpi-win-shared`, interleaved rounds. *bed*: "
                          "IMB-MPI1 PingPong and Allreduce, osu_latency and osu_bw between the test bed's 2 nodes "
                          "(TCP over a veth pair), plain malloc, glibc `hugetlb=2` and `hugepool-run`.")]

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""What every suite's report module shares: number and size formats, the JSON-lines reader, the Results
index, the plots (matplotlib, optional) and Section, one part of report.md.  Rates are derived from the
measured times: a median rate comes from the median time, and its range from the slowest and fastest
repetitions.  GB means 10^9 bytes in rates (GB/s) and GiB means 2^30 bytes in costs (ms per GiB)."""
import json
import os
import sys

GIB = 1 << 30
MIB = 1 << 20
PAGE_ORDER = ["4k", "thp", "hugetlb", "hugetlb1g", "hugepool"]
PAGE_LABEL = {"4k": "4 KB pages", "thp": "THP", "hugetlb": "hugetlb 2 MB", "hugetlb1g": "hugetlb 1 GB",
              "hugepool": "hugepool"}
PEER_ORDER = ["glibc", "glibc-hugetlb2", "libhugetlbfs", "jemalloc", "mimalloc", "mimalloc-large", "hugepool", "reuse"]
PEER_LABEL = {"glibc": "glibc malloc", "glibc-hugetlb2": "glibc hugetlb=2", "libhugetlbfs": "libhugetlbfs get_huge_pages",
              "jemalloc": "jemalloc", "mimalloc": "mimalloc", "mimalloc-large": "mimalloc large OS pages",
              "hugepool": "hugepool", "reuse": "reuse one buffer"}


def size_name(b):
    b = int(b)
    for unit, n in (("G", GIB), ("M", MIB), ("K", 1024)):
        if b >= n and b % n == 0:
            return f"{b // n} {unit}B"
    return f"{b} B"


def fmt_time(ns):
    if ns is None:
        return "–"
    for unit, div in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= div:
            return f"{ns / div:.3g} {unit}"
    return f"{ns:.3g} ns"


def fmt(v, digits=3):
    if v is None:
        return "–"
    if abs(v) >= 10 ** digits:
        return f"{v:.0f}"
    return f"{v:.{digits}g}"


def time_cell(r, scale=1.0):
    """median [min–max] of a time line (ns), scaled."""
    return f"{fmt_time(r['median'] * scale)} [{fmt_time(r['min'] * scale)}–{fmt_time(r['max'] * scale)}]"


def rate_cell(size, r, per_ns=1.0):
    """GB/s from a time line: median [slowest–fastest]."""
    def rate(t):
        return size / (t * per_ns) if t else None
    return f"{fmt(rate(r['median']))} [{fmt(rate(r['max']))}–{fmt(rate(r['min']))}]"


def load(path):
    lines = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError as e:
                print(f"report.py: {path}:{n}: not JSON ({e}), ignored", file=sys.stderr)
    return lines


class Results:
    def __init__(self, lines):
        self.lines = lines
        self.machine = next((x for x in lines if x.get("bench") == "machine"), {})
        self.end = next((x for x in lines if x.get("bench") == "end"), {})
        self.steps = [x for x in lines if x.get("bench") == "step"]
        self.skips = [x for x in lines if "skip" in x]
        self.info = [x for x in lines if "info" in x]
        self.rows = [x for x in lines if "metric" in x]

    def find(self, **kw):
        return [r for r in self.rows if all(r.get(k) == v for k, v in kw.items())]

    def one(self, **kw):
        rows = self.find(**kw)
        return rows[0] if rows else None

    def values(self, key, **kw):
        vals = {r.get(key) for r in self.find(**kw)}
        vals.discard(None)
        return vals


def ordered(values, order):
    return [v for v in order if v in values] + sorted(v for v in values if v not in order)


# ---------------------------------------------------------------- plots
class Plots:
    def __init__(self, outdir, prefix):
        self.outdir, self.prefix = outdir, prefix
        self.made = []
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            self.plt = plt
            self.why_not = None
        except Exception as e:  # matplotlib missing: the tables still stand
            self.plt = None
            self.why_not = f"matplotlib not available to {sys.executable} ({e})"

    def save(self, fig, name):
        path = os.path.join(self.outdir, self.prefix + name)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        self.plt.close(fig)
        self.made.append(os.path.basename(path))
        return os.path.basename(path)


def plot_lines(plots, name, title, xlabel, ylabel, series, logx=True, logy=False, hline=None):
    """series: list of (label, [(x, median, lo, hi)])"""
    if not plots.plt or not any(pts for _, pts in series):
        return None
    fig, ax = plots.plt.subplots(figsize=(7.5, 4.5))
    for label, pts in series:
        if not pts:
            continue
        pts = sorted(pts)
        xs = [p[0] for p in pts]
        med = [p[1] for p in pts]
        lo = [p[1] - p[2] for p in pts]
        hi = [p[3] - p[1] for p in pts]
        ax.errorbar(xs, med, yerr=[lo, hi], marker="o", capsize=3, label=label)
    if hline:
        ax.axhline(hline[0], color="grey", linestyle="--", linewidth=1, label=hline[1])
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return plots.save(fig, name)


def plot_bars(plots, name, title, ylabel, groups, series, logy=True):
    """groups: x labels; series: list of (label, [value or None per group])"""
    if not plots.plt or not series:
        return None
    fig, ax = plots.plt.subplots(figsize=(8, 4.5))
    width = 0.8 / len(series)
    for i, (label, vals) in enumerate(series):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        pts = [(x, v) for x, v in zip(xs, vals) if v is not None and v > 0]
        if pts:
            ax.bar([p[0] for p in pts], [p[1] for p in pts], width, label=label)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, fontsize=8)
    if logy:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return plots.save(fig, name)


# ---------------------------------------------------------------- sections
def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return out


def shows(md, findings):
    """The paragraph of sentences computed from this run's numbers (none: no paragraph)."""
    if findings:
        md.append("**What this run shows.** " + " ".join(findings))
        md.append("")


def range_cell(r):
    """median [min–max] of a line, or – without one."""
    return f"{fmt(r['median'])} [{fmt(r['min'])}–{fmt(r['max'])}]" if r else "–"




class Section:
    """One part of report.md: the suite it belongs to (numbered sections take the suite's number, its line
    in bench/suites/list, whether or not a run has it: "## 5. TLB reach" is always 5), its heading, the
    paragraph under it (a string, or a function returning one), whether this run has anything for it, and
    body(md, plots), which writes the rest."""

    def __init__(self, suite, title, body, intro=None, present=lambda: True, numbered=True, level=2):
        self.suite, self.title, self.body, self.intro, self.present = suite, title, body, intro, present
        self.numbered, self.level = numbered, level


def file_section(run, suite, title, name, intro, fenced=False):
    """The section of a suite whose runner writes its part of the report itself: the file `name` of the
    suite's output folder, as Markdown (or, fenced, as the text it is); absent from a run without it."""
    path = os.path.join(run.dir(suite), name)

    def body(md, plots):
        with open(path) as f:
            lines = f.read().splitlines()
        md += (["```"] + lines + ["```"] if fenced else lines) + [""]

    return Section(suite, title, body, intro=intro, present=lambda: os.path.exists(path))

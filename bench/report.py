#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Turn a bench/run results directory into results.json, report.md and plots.

    report.py DIR [--title TEXT] [--plot-prefix PREFIX]

Reads DIR/results.jsonl (one JSON object per line, see bench/bench_util.hpp).
Rates are derived from the measured times: a median rate comes from the median
time, and its range from the slowest and fastest repetitions.  GB means 10^9
bytes in rates (GB/s) and GiB means 2^30 bytes in costs (ms per GiB).
Every sentence the report prints about a comparison is computed from the
numbers of this one run.
"""
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


def section_machine(R, md, plots, cost):
    m = R.machine
    md += table(["", ""], [
        ["CPU", f"{m.get('cpu', '?')} ({m.get('cpus', '?')} CPUs)"],
        ["kernel", m.get("kernel", "?")],
        ["memory", m.get("memory", "?")],
        ["virtualised", m.get("virtualised", "?")],
        ["THP enabled / defrag", f"{m.get('thp', '?')} / {m.get('thp_defrag', '?')}"],
        ["glibc / MPICH / UCX", f"{m.get('glibc', '?')} / {m.get('mpich', '?')} / {m.get('ucx', '?')}"],
        ["mode", m.get("mode", "?")],
        ["started / ended (UTC)", f"{m.get('date', '?')} / {R.end.get('date', '?')}"],
        ["load average at start / end", f"{m.get('load_start', '?')} / {R.end.get('load_end', '?')}"],
    ])
    if R.steps:
        md.append("")
        md.append(f"Steps (total {sum(s['seconds'] for s in R.steps)} s). Before each step the driver waited (up to a "
                  "limit) for the shared machine to have no other runnable process; *other runnable* is what was "
                  "still running when the step started, *load after* the 1-minute load average when it ended.")
        md.append("")
        md += table(["step", "seconds", "waited for quiet (s)", "other runnable at start", "load after"],
                    [[s["step"], s["seconds"], s.get("waited_s", "–"), s.get("busy_at_start", "–"),
                      s.get("load_after", "–")] for s in R.steps])
    md.append("")
    md.append("**Noise.** Every number is the median of repeated measurements in this one run, with the "
              "fastest and slowest repetition in brackets as [min–max]. Compare numbers within this report; "
              "absolute times depend on the machine and on whatever else it was doing (the load averages above).")
    md.append("")


def section_skips(R, md, plots, cost):
    if not R.skips:
        md.append("Nothing was skipped.")
    else:
        md += table(["benchmark", "what", "why"], [[s.get("bench", "?"), s.get("skip", "?"), s.get("reason", "?")]
                                                  for s in R.skips])
    md.append("")


def section_touch(R, md, plots, cost):
    out = []
    sizes = sorted(R.values("size", bench="touch"))
    for page in ordered(R.values("page", bench="touch"), PAGE_ORDER):
        for size in sizes:
            w = R.one(bench="touch", page=page, size=size, phase="warm", metric="alloc_touch_ns")
            if not w:
                continue
            c = R.one(bench="touch", page=page, size=size, phase="cold", metric="alloc_touch_ns")
            f = R.one(bench="touch", page=page, size=size, phase="warm", metric="free_ns")
            per4k = w["median"] / (size / 4096)
            out.append([PAGE_LABEL.get(page, page), size_name(size), rate_cell(size, w), fmt(per4k),
                        f"{fmt(size / c['median'])} / {fmt(size / c['max'])} ({fmt(c['max'] / w['median'], 2)}× warm)"
                        if c else "–",
                        fmt_time(f["median"]) if f else "–"])
    md += table(["page type", "size", "warm GB/s median [min–max]", "warm ns per 4 KB", "cold GB/s median / worst (worst time vs warm median)",
                 "free"], out)
    md.append("")
    series = []
    for page in ordered(R.values("page", bench="touch"), PAGE_ORDER):
        pts = [(r["size"], r["size"] / r["median"], r["size"] / r["max"], r["size"] / r["min"])
               for r in R.find(bench="touch", page=page, phase="warm", metric="alloc_touch_ns")]
        series.append((PAGE_LABEL.get(page, page), pts))
    png = plot_lines(plots, "touch_bandwidth.png", "First touch (warm): allocation + fault-in rate",
                     "buffer size (bytes)", "GB/s", series, logy=True)
    if png:
        md.append(f"![first touch]({png})")
        md.append("")
    # cost per GiB at the largest common size
    for page in ordered(R.values("page", bench="touch"), PAGE_ORDER):
        rs = R.find(bench="touch", page=page, phase="warm", metric="alloc_touch_ns")
        if rs:
            r = max(rs, key=lambda x: x["size"])
            cost.setdefault(page, {})["first touch (warm)"] = r["median"] / r["size"] * GIB / 1e6
        rs = R.find(bench="touch", page=page, phase="cold", metric="alloc_touch_ns")
        if rs:
            r = max(rs, key=lambda x: x["size"])
            cost.setdefault(page, {})["first touch (cold worst)"] = r["max"] / r["size"] * GIB / 1e6
    findings = []
    big = max(sizes)
    s4 = R.one(bench="touch", page="4k", size=big, phase="warm", metric="alloc_touch_ns")
    sh = R.one(bench="touch", page="hugetlb", size=big, phase="warm", metric="alloc_touch_ns")
    sp = R.one(bench="touch", page="hugepool", size=big, phase="warm", metric="alloc_touch_ns")
    if s4 and sh:
        findings.append(f"At {size_name(big)}, faulting in 4 KB pages took {fmt(s4['median'] / sh['median'], 2)}× "
                        f"as long as hugetlb 2 MB pages ({fmt(big / s4['median'])} vs {fmt(big / sh['median'])} GB/s).")
    if sp and sh:
        findings.append(f"A warm hugepool buffer of {size_name(big)} was usable in {fmt_time(sp['median'])}, "
                        f"{fmt(sh['median'] / sp['median'], 2)}× faster than mapping and faulting fresh hugetlb "
                        "memory, because it comes back from the cache already faulted in.")
    for page in ("thp", "hugetlb", "hugepool", "4k"):
        cs = R.find(bench="touch", page=page, phase="cold", metric="alloc_touch_ns")
        for c in cs:
            w = R.one(bench="touch", page=page, size=c["size"], phase="warm", metric="alloc_touch_ns")
            if w:
                findings.append(f"{PAGE_LABEL[page]} at {size_name(c['size'])}: cold worst case "
                                f"{fmt(c['max'] / w['median'], 2)}× the warm median "
                                f"(idle {c.get('idle_s', '?')} s, {c['n']} cold repetitions).")
    shows(md, findings)


def section_pin(R, md, plots, cost):
    out = []
    sizes = sorted(R.values("size", bench="pin"))
    for page in ordered(R.values("page", bench="pin"), PAGE_ORDER):
        for size in sizes:
            reg = R.one(bench="pin", page=page, size=size, metric="uring_register_ns")
            un = R.one(bench="pin", page=page, size=size, metric="uring_unregister_ns")
            ml = R.one(bench="pin", page=page, size=size, metric="mlock_ns")
            mu = R.one(bench="pin", page=page, size=size, metric="munlock_ns")
            if not (reg or ml):
                continue
            out.append([PAGE_LABEL.get(page, page), size_name(size), time_cell(reg) if reg else "–",
                        fmt(reg["median"] / (size / 4096)) if reg else "–", time_cell(un) if un else "–",
                        fmt(un["median"] / (size / 4096)) if un else "–",
                        fmt_time(ml["median"]) if ml else "–", fmt_time(mu["median"]) if mu else "–"])
    md += table(["page type", "size", "io_uring register median [min–max]", "register ns per 4 KB",
                 "unregister median [min–max]", "unregister ns per 4 KB", "mlock", "munlock"], out)
    md.append("")
    for page in R.values("page", bench="pin"):
        for metric, label in (("uring_register_ns", "io_uring register"), ("mlock_ns", "mlock")):
            rs = R.find(bench="pin", page=page, metric=metric)
            if rs:
                r = max(rs, key=lambda x: x["size"])
                cost.setdefault(page, {})[label] = r["median"] / r["size"] * GIB / 1e6
    big = max(sizes)
    a = R.one(bench="pin", page="4k", size=big, metric="uring_register_ns")
    b = R.one(bench="pin", page="hugetlb", size=big, metric="uring_register_ns")
    if a and b:
        shows(md, [f"Registering {size_name(big)} on 4 KB pages took {fmt_time(a['median'])}, "
                   f"on hugetlb pages {fmt_time(b['median'])} ({fmt(a['median'] / b['median'], 2)}×). A code that "
                   "registers a buffer per message pays this every time; one that keeps buffers registered pays it "
                   "once."])


def section_cost_plot(R, md, plots, cost):
    pages = ordered(set(cost), PAGE_ORDER)
    metrics = ["first touch (warm)", "first touch (cold worst)", "io_uring register", "mlock"]
    metrics = [m for m in metrics if any(m in cost[p] for p in pages)]
    md += table(["page type"] + metrics, [[PAGE_LABEL.get(p, p)] + [fmt(cost[p].get(m)) for m in metrics]
                                          for p in pages])
    md.append("")
    png = plot_bars(plots, "cost_per_gb.png", "Cost per GiB by page type (largest size measured)", "ms per GiB",
                    [PAGE_LABEL.get(p, p) for p in pages], [(m, [cost[p].get(m) for p in pages]) for m in metrics])
    if png:
        md.append(f"![cost per GiB]({png})")
        md.append("")


def translate_intro(R):
    frag = [i for i in R.info if i.get("info") == "fragmenter"]
    return ("Physically-contiguous, power-of-two chunks of at most 2 MB that each buffer needs, read from "
            "/proc/self/pagemap: the number of translation entries an Omni-Path (hfi1) style driver programs to "
            "register it. *fresh* = the node as it was; *fragmented* = after a fragmenter took " +
            ", ".join(f"{size_name(f['bytes'])} of 4 KB pages and freed "
                      f"{'every other one' if f['mode'] == 'alternate' else 'a random half'}" for f in frag) +
            ". The ideal is one chunk per 2 MB.")


def section_translate(R, md, plots, cost):
    out = []
    states = ordered(R.values("state", bench="translate"), ["fresh", "fragmented-alternate", "fragmented-random"])
    sizes = sorted(R.values("size", bench="translate"))
    for page in ordered(R.values("page", bench="translate"), PAGE_ORDER):
        for size in sizes:
            for st in states:
                r = R.one(bench="translate", page=page, size=size, state=st)
                if r:
                    out.append([PAGE_LABEL.get(page, page), size_name(size), st,
                                f"{fmt(r['median'], 6)} [{fmt(r['min'], 6)}–{fmt(r['max'], 6)}]",
                                fmt(r["median"] / r["per_2m_ideal"], 4)])
    md += table(["page type", "size", "state", "chunks median [min–max]", "chunks per 2 MB"], out)
    md.append("")
    pages = ordered(R.values("page", bench="translate"), PAGE_ORDER)
    series = []
    for st in states:
        vals = []
        for p in pages:
            rs = R.find(bench="translate", page=p, state=st)
            r = max(rs, key=lambda x: x["size"]) if rs else None
            vals.append(r["median"] / r["per_2m_ideal"] if r else None)
        series.append((st, vals))
    png = plot_bars(plots, "translation_counts.png", "Translation chunks per 2 MB (largest size measured in each state)",
                    "chunks per 2 MB (log)", [PAGE_LABEL.get(p, p) for p in pages], series)
    if png:
        md.append(f"![translation counts]({png})")
        md.append("")
    findings = []
    for st in states:
        if st == "fresh":
            continue
        a = [r for r in R.find(bench="translate", page="4k", state=st)]
        h = [r for r in R.find(bench="translate", page="hugetlb", state=st)] + \
            [r for r in R.find(bench="translate", page="hugepool", state=st)]
        if a and h:
            worst = max(r["median"] / r["per_2m_ideal"] for r in a)
            hmax = max(r["max"] / r["per_2m_ideal"] for r in h)
            findings.append(f"{st}: 4 KB buffers needed up to {fmt(worst, 4)} chunks per 2 MB; hugetlb/hugepool "
                            f"buffers at most {fmt(hmax, 4)}.")
    t = [r for r in R.find(bench="translate", page="thp") if r["state"] != "fresh"]
    if t:
        findings.append(f"THP after fragmentation: at worst {fmt(max(r['max'] / r['per_2m_ideal'] for r in t), 4)} "
                        "chunk(s) per 2 MB (THP depends on the kernel finding or compacting free 2 MB blocks at "
                        "fault time; hugetlb pages were set aside before).")
    shows(md, findings)


def section_cma(R, md, plots, cost):
    out = []
    sizes = sorted(R.values("size", bench="cma"))
    for page in ordered(R.values("local", bench="cma"), PAGE_ORDER):
        for size in sizes:
            rd = R.one(bench="cma", local=page, remote=page, size=size, metric="readv_ns")
            wr = R.one(bench="cma", local=page, remote=page, size=size, metric="writev_ns")
            if rd:
                out.append([PAGE_LABEL.get(page, page), size_name(size), rate_cell(size, rd),
                            rate_cell(size, wr) if wr else "–"])
    for size in sizes:
        m = R.one(bench="cma", remote="same-process", size=size, metric="memcpy_ns")
        if m:
            out.append([f"memcpy, {PAGE_LABEL.get(m['local'], m['local'])}, one process", size_name(size),
                        rate_cell(size, m), "–"])
    md += table(["page type (both sides)", "size", "readv GB/s median [min–max]", "writev GB/s"], out)
    md.append("")
    pairs = [r for r in R.find(bench="cma", metric="readv_ns") if r["local"] != r["remote"]]
    msizes = sorted({r["size"] for r in pairs})
    for size in msizes:
        locs = ordered({r["local"] for r in R.find(bench="cma", metric="readv_ns", size=size)} - {"same-process"}, PAGE_ORDER)
        rems = ordered({r["remote"] for r in R.find(bench="cma", metric="readv_ns", size=size)} - {"same-process"}, PAGE_ORDER)
        md.append(f"readv GB/s at {size_name(size)}, local (rows) × remote (columns):")
        md.append("")
        trow = []
        for lo in locs:
            cells = []
            for re in rems:
                r = R.one(bench="cma", local=lo, remote=re, size=size, metric="readv_ns")
                cells.append(fmt(size / r["median"]) if r else "–")
            trow.append([PAGE_LABEL.get(lo, lo)] + cells)
        md += table(["local \\ remote"] + [PAGE_LABEL.get(r, r) for r in rems], trow)
        md.append("")
    series = []
    for page in ordered(R.values("local", bench="cma"), PAGE_ORDER):
        pts = [(r["size"], r["size"] / r["median"], r["size"] / r["max"], r["size"] / r["min"])
               for r in R.find(bench="cma", local=page, remote=page, metric="readv_ns")]
        series.append((PAGE_LABEL.get(page, page), pts))
    mc = R.find(bench="cma", remote="same-process", metric="memcpy_ns")
    if mc:
        series.append(("memcpy (one process)", [(r["size"], r["size"] / r["median"], r["size"] / r["max"],
                                                  r["size"] / r["min"]) for r in mc]))
    png = plot_lines(plots, "cma_bandwidth.png", "process_vm_readv bandwidth vs size (same page type both sides)",
                     "bytes per call", "GB/s", series)
    if png:
        md.append(f"![CMA bandwidth]({png})")
        md.append("")
    findings = []
    for size in msizes:
        a = R.one(bench="cma", local="4k", remote="4k", size=size, metric="readv_ns")
        b = R.one(bench="cma", local="4k", remote="hugetlb", size=size, metric="readv_ns")
        c = R.one(bench="cma", local="hugetlb", remote="4k", size=size, metric="readv_ns")
        if a and b and c:
            findings.append(f"At {size_name(size)}, reading from a remote hugetlb buffer ran at "
                            f"{fmt(size / b['median'])} GB/s into a 4 KB local buffer, against {fmt(size / a['median'])} "
                            f"GB/s with both on 4 KB pages and {fmt(size / c['median'])} GB/s from a remote 4 KB "
                            "buffer into local hugetlb: the remote (pinned) side's page type decides.")
    shows(md, findings)


def section_tlb(R, md, plots, cost):
    sizes = sorted(R.values("size", bench="tlb"))
    pages = ordered(R.values("page", bench="tlb"), PAGE_ORDER)
    out = []
    for size in sizes:
        row = [size_name(size)]
        for p in pages:
            r = R.one(bench="tlb", page=p, size=size)
            row.append(range_cell(r))
        out.append(row)
    md += table(["buffer"] + [f"{PAGE_LABEL.get(p, p)} ns/access" for p in pages], out)
    md.append("")
    series = [(PAGE_LABEL.get(p, p), [(r["size"], r["median"], r["min"], r["max"]) for r in R.find(bench="tlb", page=p)])
              for p in pages]
    png = plot_lines(plots, "tlb.png", "Random pointer chase", "buffer size (bytes)", "ns per access", series)
    if png:
        md.append(f"![TLB reach]({png})")
        md.append("")
    big = max(sizes)
    a, b = R.one(bench="tlb", page="4k", size=big), R.one(bench="tlb", page="hugetlb", size=big)
    if a and b:
        shows(md, [f"Over {size_name(big)}, a random access cost {fmt(a['median'])} ns on 4 KB "
                   f"pages and {fmt(b['median'])} ns on hugetlb 2 MB pages ({fmt(a['median'] / b['median'], 2)}×). "
                   "This matters for codes that gather/scatter into large buffers; for streaming copies it does not."])


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


def range_cell(r):
    """median [min–max] of a line, or – without one."""
    return f"{fmt(r['median'])} [{fmt(r['min'])}–{fmt(r['max'])}]" if r else "–"


def alloc_rows(R, peers, test, columns, cell, keep_empty=True):
    """One row per allocator of the alloc benchmark's test: (peer, [cell(r) for each column]), where a
    column is the dict of fields that picks its line r (None when the run has none).  A row whose
    cells are all "–" is left out unless keep_empty."""
    rows = []
    for p in peers:
        cells = [cell(R.one(bench="alloc", peer=p, test=test, **c)) for c in columns]
        if keep_empty or any(c != "–" for c in cells):
            rows.append((p, cells))
    return rows


def section_alloc(R, md, plots, cost):
    peers = ordered(R.values("peer", bench="alloc"), PEER_ORDER)
    cs = sorted(R.values("size", bench="alloc", test="cached"))
    if cs:
        md.append("### Cached alloc + free of the same size (no touch), ns per pair, median of batches [min–max]")
        md.append("")
        out = [[PEER_LABEL.get(p, p)] + cells
               for p, cells in alloc_rows(R, peers, "cached", [{"size": s} for s in cs], range_cell)]
        md += table(["allocator"] + [size_name(s) for s in cs], out)
        md.append("")
        hp = R.find(bench="alloc", peer="hugepool", test="cached")
        if hp:
            verdict = ", ".join(f"{size_name(r['size'])}: {fmt(r['median'])} ns "
                                f"({'meets' if r['median'] <= 100 else 'misses'} the ≤100 ns target)" for r in hp)
            md.append(f"hugepool cached alloc+free median — {verdict}.")
            md.append("")
    ms = sorted(R.values("size", bench="alloc", test="memset"))
    if ms:
        md.append("### alloc + memset of the whole buffer + free, time per iteration, median [min–max]")
        md.append("")
        def memset_cell(r):
            return (f"{time_cell(r)}; hugetlb in use {size_name(r['hugetlb_kb'] * 1024) if r.get('hugetlb_kb', -1) > 0 else '0'}"
                    if r else "–")
        by_size = [{"size": s} for s in ms]
        out = [[PEER_LABEL.get(p, p)] + cells for p, cells in alloc_rows(R, peers, "memset", by_size, memset_cell)]
        md += table(["allocator"] + [size_name(s) for s in ms], out)
        md.append("")
        series = [(PEER_LABEL.get(p, p), vals) for p, vals in
                  alloc_rows(R, peers, "memset", by_size, lambda r: r["median"] / 1e6 if r else None)]
        png = plot_bars(plots, "alloc_memset.png", "alloc + memset + free per iteration", "ms (log)",
                        [size_name(s) for s in ms], series)
        if png:
            md.append(f"![allocator comparison]({png})")
            md.append("")
        findings = []
        for size in ms:
            g = R.one(bench="alloc", peer="glibc", test="memset", size=size)
            h = R.one(bench="alloc", peer="hugepool", test="memset", size=size)
            u = R.one(bench="alloc", peer="reuse", test="memset", size=size)
            t = R.one(bench="alloc", peer="glibc-hugetlb2", test="memset", size=size)
            if g and h:
                s = (f"{size_name(size)}: hugepool {fmt_time(h['median'])}, glibc {fmt_time(g['median'])}")
                if t:
                    s += f", glibc hugetlb=2 {fmt_time(t['median'])}"
                if u:
                    s += f", reuse baseline {fmt_time(u['median'])}"
                findings.append(s + ".")
        shows(md, findings)
    th = R.find(bench="alloc", test="threads")
    if th:
        counts = sorted(R.values("threads", bench="alloc", test="threads"))
        sizes = sorted(R.values("size", bench="alloc", test="threads"))
        md.append("### Cached alloc + free from several threads at once (each its own buffer), ns per pair per "
                  "thread, median [min–max]")
        md.append("")
        out = [[PEER_LABEL.get(p, p), size_name(size)] + cells
               for q in peers for size in sizes
               for p, cells in alloc_rows(R, [q], "threads", [{"size": size, "threads": n} for n in counts],
                                          range_cell, keep_empty=False)]
        md += table(["allocator", "size"] + [f"{n} thread{'s' if n > 1 else ''}" for n in counts], out)
        md.append("")
    dp = R.find(bench="alloc", test="depth")
    if dp:
        depths = sorted(R.values("cached_others", bench="alloc", test="depth"))
        md.append("### Hit cost against the buffers cached: alloc + free of 4 MB with N other freed 2 MB buffers, "
                  "ns per pair, median [min–max]")
        md.append("")
        out = [[PEER_LABEL.get(p, p)] + cells for p, cells in
               alloc_rows(R, peers, "depth", [{"cached_others": d} for d in depths], range_cell, keep_empty=False)]
        md += table(["allocator"] + [f"{d} cached" for d in depths], out)
        md.append("")
    mx = R.find(bench="alloc", test="mixed")
    if mx:
        largest = size_name(max(r.get("largest", 64 * MIB) for r in mx))
        md.append(f"### Mixed workload: one application step (4–8 communication buffers of 1 MB to {largest} alive "
                  "at once, each written in full, 50 small mallocs per buffer, freed in shuffled order)")
        md.append("")
        out = [[PEER_LABEL.get(p, p), time_cell(r), size_name(r["hugetlb_kb"] * 1024) if r.get("hugetlb_kb", 0) > 0 else "0"]
               for p, (r,) in alloc_rows(R, peers, "mixed", [{}], lambda r: r) if r]
        md += table(["allocator", "time per step median [min–max]", "peak hugetlb in use"], out)
        md.append("")


# ---------------------------------------------------------------- the report
class Section:
    """One part of report.md: its heading, the paragraph under it (a string, or a function of the results),
    whether this run has anything for it, and the function that writes the rest.  Numbered sections take
    their number from their place in SECTIONS, whether or not a run has them ("## 5. TLB reach" is always 5)."""

    def __init__(self, title, body, intro=None, present=lambda R, cost: True, numbered=True, level=2):
        self.title, self.body, self.intro, self.present = title, body, intro, present
        self.numbered, self.level = numbered, level


def rows_of(**kw):
    return lambda R, cost: bool(R.find(**kw))


SECTIONS = [
    Section("Machine and run", section_machine, numbered=False),
    Section("Skipped", section_skips, numbered=False),
    Section("First-touch cost", section_touch, present=rows_of(bench="touch", metric="alloc_touch_ns", phase="warm"),
            intro="Time from asking for a buffer to having written one byte into each of its 4 KB pages "
                  "(map + fault + zero), then unmapped again; *warm* = back-to-back repetitions, *cold* = after the "
                  "memory was left idle for some seconds first (worst repetition shown). For hugepool the warm "
                  "repetitions are served from its cache: the pages are already faulted in; its cold case is the "
                  "first allocation after hugepool_trim() (a fresh mapping, populated by hugepool)."),
    Section("Pinning cost", section_pin, present=rows_of(bench="pin"),
            intro="io_uring fixed-buffer registration pins every page of an already-touched buffer, the same "
                  "work an RDMA memory registration does; unregister unpins. mlock/munlock is a supporting number."),
    # Filled in by the two sections above (cost: page type -> {what: ms per GiB}).
    Section("Cost per GiB by page type", section_cost_plot, present=lambda R, cost: bool(cost), numbered=False,
            level=3, intro="Measured at the largest size each benchmark ran, in ms per GiB (lower is better)."),
    Section("Translation count", section_translate, present=rows_of(bench="translate"), intro=translate_intro),
    Section("Cross-process copy (CMA)", section_cma, present=rows_of(bench="cma"),
            intro="process_vm_readv / process_vm_writev between two processes, the single-copy path intra-node MPI "
                  "uses for large messages; the kernel pins the remote buffer on every call. *local* is the "
                  "caller's buffer, *remote* the other process's. A same-process memcpy gives the copy limit."),
    Section("TLB reach", section_tlb, present=rows_of(bench="tlb"),
            intro="Dependent loads through a random cycle over every 64-byte line of the buffer: each step misses "
                  "the caches; with small pages it also misses the TLB and walks the page table."),
    Section("MPI (MPICH, 2 ranks bound to cores)", section_mpi, present=rows_of(bench="mpi"),
            intro="Buffers from posix_memalign (4 KB pages), mmap MAP_HUGETLB (hugetlb), and hugepool_alloc. "
                  "*default* = UCX's default transports (large messages take the CMA single-copy path); "
                  "*posix,self* = UCX_TLS=posix,self, copy through shared memory: the control. All MPI runs set "
                  "UCX_MEM_MALLOC_HOOKS=n UCX_MEM_MALLOC_RELOC=n (needed with a caching allocator)."),
    Section("Allocator comparison", section_alloc, present=rows_of(bench="alloc"),
            intro="Same binary, same run. glibc rows: plain, and with GLIBC_TUNABLES=glibc.malloc.hugetlb=2; "
                  "jemalloc and mimalloc by LD_PRELOAD into the binary that only calls malloc/free; libhugetlbfs "
                  "get_huge_pages/free_huge_pages (on a private hugetlbfs mount); hugepool_alloc/hugepool_free; "
                  "and a baseline that allocates one buffer once and reuses it without freeing. *hugetlb in use* "
                  "is the process's HugetlbPages from /proc/self/status while the buffer was live: it shows which "
                  "peers really got hugetlb pages."),
]


def write_sections(R, md, plots):
    cost = {}
    number = 0
    for sec in SECTIONS:
        number += sec.numbered
        if not sec.present(R, cost):
            continue
        md.append("#" * sec.level + " " + (f"{number}. " if sec.numbered else "") + sec.title)
        if sec.intro:
            md.append(sec.intro(R) if callable(sec.intro) else sec.intro)
            md.append("")
        sec.body(R, md, plots, cost)


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    outdir = sys.argv[1]
    title = "hugepool benchmark report"
    prefix = ""
    args = sys.argv[2:]
    while args:
        if args[0] == "--title" and len(args) > 1:
            title, args = args[1], args[2:]
        elif args[0] == "--plot-prefix" and len(args) > 1:
            prefix, args = args[1], args[2:]
        else:
            print(f"report.py: unknown argument {args[0]}", file=sys.stderr)
            return 2
    R = Results(load(os.path.join(outdir, "results.jsonl")))
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump({"machine": R.machine, "end": R.end, "steps": R.steps, "skipped": R.skips, "info": R.info,
                   "results": R.rows}, f, indent=1)
    plots = Plots(outdir, prefix)
    md = [f"# {title}", ""]
    write_sections(R, md, plots)
    if plots.why_not:
        md.append(f"_No plots: {plots.why_not}._")
        md.append("")
    spaced = []  # a blank line after every heading, for every Markdown renderer
    for i, line in enumerate(md):
        spaced.append(line)
        if line.startswith("#") and i + 1 < len(md) and md[i + 1] != "":
            spaced.append("")
    with open(os.path.join(outdir, "report.md"), "w") as f:
        f.write("\n".join(spaced) + "\n")
    print(f"report.py: {len(R.rows)} results, {len(R.skips)} skipped, {len(plots.made)} plots -> "
          f"{os.path.join(outdir, 'report.md')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

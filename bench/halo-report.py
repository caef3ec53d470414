#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Markdown tables and plots from hugepool-bench-halo's JSON lines.
   halo-report.py halo.jsonl OUTDIR  ->  OUTDIR/halo.md, halo-exchange.png, halo-allreduce.png

On a shared machine the median of a column can be set by how often a rank
lost its CPU during the run rather than by the memory it uses, so each table
gives the median with its min-max and, beside it, the best repetition: the
figure that repeats from run to run when the load changes."""
import json
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
out = sys.argv[2]
halo_cols = ["seq_huge", "seq_memalign", "conc_memalign", "conc_huge", "threaded_huge", "shared_huge"]
ring_cols = ["original", "cached", "hugepool", "hugepool_threads"]


def collect(test):
    data = {}
    for r in rows:
        if r.get("test") == test and "median" in r:
            data.setdefault(r["size"], {})[r["column"]] = r
    return data


def table(data, cols, value):
    lines = ["| bytes | " + " | ".join(cols) + " |", "|---:|" + "---:|" * len(cols)]
    for size in sorted(data):
        cells = [value(data[size][c]) if c in data[size] else "—" for c in cols]
        lines.append(f"| {size:,} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def gbps(r, t_us):  # 16 faces moved per exchange
    return 16.0 * r["size"] / t_us / 1e3


hd, rd = collect("halo"), collect("ring_allreduce")
reps = sorted({r["n"] for r in rows if "n" in r})
skips = [r for r in rows if "skip" in r]
loads = [r for r in rows if "load" in r]
text = ["### Halo exchange: median µs per exchange (min–max)\n",
        table(hd, halo_cols, lambda r: f"{r['median']:.0f} ({r['min']:.0f}–{r['max']:.0f})"),
        "\n### Halo exchange: GB/s per rank, median / best repetition\n",
        table(hd, halo_cols, lambda r: f"{gbps(r, r['median']):.2f} / {gbps(r, r['min']):.1f}"),
        "\n16 faces moved per exchange over the median (or the fastest) exchange time.\n",
        "\n### Ring allreduce: median ms per allreduce (min–max)\n",
        table(rd, ring_cols, lambda r: f"{r['median'] / 1e3:.2f} ({r['min'] / 1e3:.2f}–{r['max'] / 1e3:.2f})"),
        f"\nRepetitions per column: {', '.join(map(str, reps))} (interleaved, after a warm-up round).\n"]
if loads:
    text.append("\nLoad average (1/5/15 min) at the start and end of each run: " + "; ".join(
        f"{r['parts']} {r['load']} {r['when']} {r['load1']}/{r['load5']}/{r['load15']}" for r in loads) + "\n")
for s in skips:
    text.append(f"\nskipped: {s['skip']}: {s['reason']}\n")
with open(f"{out}/halo.md", "w") as f:
    f.write("".join(text))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for name, data, cols, stats, ylabel in (
        ("halo-exchange", hd, halo_cols, (("median", lambda r: gbps(r, r["median"])), ("best", lambda r: gbps(r, r["min"]))),
         "GB/s per rank"),
        ("halo-allreduce", rd, ring_cols, (("median", lambda r: r["median"] / 1e3), ("best", lambda r: r["min"] / 1e3)),
         "ms per allreduce"),
    ):
        fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
        for ax, (what, key) in zip(axes, stats):
            for c in cols:
                xs = [s for s in sorted(data) if c in data[s]]
                ax.plot(xs, [key(data[s][c]) for s in xs], marker="o", label=c)
            ax.set_xscale("log")
            if name == "halo-allreduce":
                ax.set_yscale("log")
            ax.set_title(what)
            ax.set_xlabel("bytes (face / vector)")
            ax.grid(True, alpha=0.3)
        axes[0].set_ylabel(ylabel)
        axes[0].legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(f"{out}/{name}.png", dpi=90)
except ImportError:
    print("halo-report: no matplotlib, no plots", file=sys.stderr)
print(open(f"{out}/halo.md").read())

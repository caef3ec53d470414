#!/usr/bin/python3
"""Markdown tables and plots from hugepool-bench-halo's JSON lines.
   halo-report.py halo.jsonl OUTDIR  ->  OUTDIR/halo.md, halo-exchange.png, halo-allreduce.png"""
import json
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
out = sys.argv[2]
halo_cols = ["seq_huge", "seq_memalign", "conc_memalign", "conc_huge", "threaded_huge", "shared_huge"]
ring_cols = ["original", "cached", "hugepool", "hugepool_threads"]


def table(test, cols, unit_note, value):
    data = {}
    for r in rows:
        if r.get("test") == test and "median" in r:
            data.setdefault(r["size"], {})[r["column"]] = r
    lines = ["| bytes | " + " | ".join(cols) + " |", "|---:|" + "---:|" * len(cols)]
    for size in sorted(data):
        cells = []
        for c in cols:
            r = data[size].get(c)
            cells.append(value(r) if r else "—")
        lines.append(f"| {size:,} | " + " | ".join(cells) + " |")
    return data, "\n".join(lines) + "\n\n" + unit_note + "\n"


def halo_cell(r):
    return f"{r['gbytes_per_s']:.2f} ({r['min']:.0f}–{r['max']:.0f} µs)"


def ring_cell(r):
    return f"{r['median'] / 1e3:.2f} ({r['min'] / 1e3:.2f}–{r['max'] / 1e3:.2f})"


skips = [r for r in rows if "skip" in r]
loads = [r for r in rows if "load" in r]
hd, ht = table("halo", halo_cols, "GB/s per rank (16 faces moved per exchange / median exchange time); "
               "in brackets the min–max exchange time in µs.", halo_cell)
rd, rt = table("ring_allreduce", ring_cols, "Median ms per allreduce (min–max).", ring_cell)
with open(f"{out}/halo.md", "w") as f:
    f.write("### Halo exchange\n\n" + ht + "\n### Ring allreduce\n\n" + rt)
    if loads:
        f.write("\nLoad average (1/5/15 min) at the start and end of each run: " + "; ".join(
            f"{r['parts']} {r['load']} {r['when']} {r['load1']}/{r['load5']}/{r['load15']}" for r in loads) + "\n")
    for s in skips:
        f.write(f"\nskipped: {s['skip']}: {s['reason']}\n")
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for name, data, cols, key, ylabel in (
        ("halo-exchange", hd, halo_cols, lambda r: r["gbytes_per_s"], "GB/s per rank"),
        ("halo-allreduce", rd, ring_cols, lambda r: r["median"] / 1e3, "ms per allreduce"),
    ):
        fig, ax = plt.subplots(figsize=(7, 4))
        for c in cols:
            xs = [s for s in sorted(data) if c in data[s]]
            ax.plot(xs, [key(data[s][c]) for s in xs], marker="o", label=c)
        ax.set_xscale("log")
        ax.set_xlabel("bytes (face / vector)")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        fig.savefig(f"{out}/{name}.png", dpi=90)
except ImportError:
    print("halo-report: no matplotlib, no plots", file=sys.stderr)
print(open(f"{out}/halo.md").read())

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Report section of the halo suite (hugepool-bench-halo, run by bench/suites/halo): Markdown tables and the
plots halo-exchange.png and halo-allreduce.png.

On a shared machine the median of a column can be set by how often a rank
lost its CPU during the run rather than by the memory it uses, so each table
gives the median with its min-max and, beside it, the best repetition: the
figure that repeats from run to run when the load changes."""
from common import Section

HALO_COLS = ["seq_huge", "seq_memalign", "conc_memalign", "conc_huge", "threaded_huge", "shared_huge"]
RING_COLS = ["original", "cached", "hugepool", "hugepool_threads"]


def collect(rows, test):
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


def text(rows, hd, rd):
    reps = sorted({r["n"] for r in rows if "n" in r})
    skips = [r for r in rows if "skip" in r]
    loads = [r for r in rows if "load" in r]
    out = ["### Halo exchange: median µs per exchange (min–max)\n",
           table(hd, HALO_COLS, lambda r: f"{r['median']:.0f} ({r['min']:.0f}–{r['max']:.0f})"),
           "\n### Halo exchange: GB/s per rank, median / best repetition\n",
           table(hd, HALO_COLS, lambda r: f"{gbps(r, r['median']):.2f} / {gbps(r, r['min']):.1f}"),
           "\n16 faces moved per exchange over the median (or the fastest) exchange time.\n",
           "\n### Ring allreduce: median ms per allreduce (min–max)\n",
           table(rd, RING_COLS, lambda r: f"{r['median'] / 1e3:.2f} ({r['min'] / 1e3:.2f}–{r['max'] / 1e3:.2f})"),
           f"\nRepetitions per column: {', '.join(map(str, reps))} (interleaved, after a warm-up round).\n"]
    if loads:
        out.append("\nLoad average (1/5/15 min) at the start and end of each run: " + "; ".join(
            f"{r['parts']} {r['load']} {r['when']} {r['load1']}/{r['load5']}/{r['load15']}" for r in loads) + "\n")
    for s in skips:
        out.append(f"\nskipped: {s['skip']}: {s['reason']}\n")
    return "".join(out)


def plot(plots, hd, rd):
    for name, data, cols, stats, ylabel in (
        ("halo-exchange", hd, HALO_COLS,
         (("median", lambda r: gbps(r, r["median"])), ("best", lambda r: gbps(r, r["min"]))), "GB/s per rank"),
        ("halo-allreduce", rd, RING_COLS,
         (("median", lambda r: r["median"] / 1e3), ("best", lambda r: r["min"] / 1e3)), "ms per allreduce"),
    ):
        fig, axes = plots.plt.subplots(1, 2, figsize=(11, 4), sharey=True)
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
        fig.savefig(f"{plots.outdir}/{plots.prefix}{name}.png", dpi=90)
        plots.plt.close(fig)
        plots.made.append(f"{plots.prefix}{name}.png")
        yield f"{plots.prefix}{name}.png"


def sections(run, suites):
    rows = run.lines(*suites)
    hd, rd = collect(rows, "halo"), collect(rows, "ring_allreduce")

    def body(md, plots):
        md.append(text(rows, hd, rd))
        if plots.plt:
            md.append(" ".join(f"![{png[:-4]}]({png})" for png in plot(plots, hd, rd)))
            md.append("")

    return [Section("halo", "Node-shared segments: the paper's halo table and the ring allreduce", body,
                    present=lambda: bool(hd or rd),
                    intro="`hugepool-bench-halo`, one mpiexec a size. Columns as in the paper: *seq* = "
                          "`MPI_Isend/Irecv/Waitall` one dimension at a time, *conc* = all eight faces at once, "
                          "*huge* = hugepool buffers, *memalign* = `posix_memalign` (4 KB pages), *threaded_huge* = "
                          "one thread per face direction, *shared_huge* = each rank copies its faces straight into "
                          "the neighbour's node-shared segment. Ring allreduce: *original* allocates its work "
                          "buffers with malloc per call, *cached* once, *hugepool* with `hugepool_alloc` per call, "
                          "*hugepool_threads* also splits every ring step over threads.")]

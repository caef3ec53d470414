#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Report section of the alloc suite (hugepool-bench-alloc[-ext] under every peer, run by
bench/suites/regcost); its tables of threads and cached depth serve the cache suite too."""
from common import (MIB, PEER_LABEL, PEER_ORDER, Results, Section, fmt, fmt_time, ordered, plot_bars, range_cell,
                    shows, size_name, table, time_cell)


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


def sections(run, suites):
    R = Results(run.lines(*suites))
    return [Section("alloc", "Allocator comparison", lambda md, plots: section_alloc(R, md, plots, None),
                    present=lambda: bool(R.find(bench="alloc")),
                    intro="Same binary, same run. glibc rows: plain, and with GLIBC_TUNABLES=glibc.malloc.hugetlb=2; "
                          "jemalloc and mimalloc by LD_PRELOAD into the binary that only calls malloc/free; "
                          "libhugetlbfs get_huge_pages/free_huge_pages (on a private hugetlbfs mount); "
                          "hugepool_alloc/hugepool_free; and a baseline that allocates one buffer once and reuses it "
                          "without freeing. *hugetlb in use* is the process's HugetlbPages from /proc/self/status "
                          "while the buffer was live: it shows which peers really got hugetlb pages.")]

#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Report sections of the registration-cost suites touch, pin, translate, cma and tlb (hugepool-bench,
run by bench/suites/regcost): tables, plots and the findings computed from this one run's numbers."""
from common import (GIB, PAGE_LABEL, PAGE_ORDER, Results, Section, fmt, fmt_time, ordered, plot_bars, plot_lines,
                    range_cell, rate_cell, shows, size_name, table, time_cell)


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
    findings = []
    big = max(sizes) if sizes else 0
    a, b = R.one(bench="tlb", page="4k", size=big), R.one(bench="tlb", page="hugetlb", size=big)
    if a and b:
        findings.append(f"Over {size_name(big)}, a random access cost {fmt(a['median'])} ns on 4 KB "
                        f"pages and {fmt(b['median'])} ns on hugetlb 2 MB pages "
                        f"({fmt(a['median'] / b['median'], 2)}×). This matters for codes that gather/scatter "
                        "into large buffers; for streaming copies it does not.")
    findings += tlb_entries(R, md)
    shows(md, findings)


def tlb_entries(R, md):
    """The tlb_entry rows (tools/tlb-probe.h): one TLB entry per 2 MB page, or 512."""
    rows = {r["page"]: r for r in R.find(bench="tlb_entry")}
    if not rows:
        return []
    out = [[PAGE_LABEL.get(p, p), fmt(rows[p]["few_parts_ns"]), fmt(rows[p]["many_parts_ns"]),
            fmt(rows[p]["many_parts_ns"] / rows[p]["few_parts_ns"], 2) + "×", rows[p].get("verdict", "(reference)")]
           for p in ordered(list(rows), PAGE_ORDER)]
    # Runs before the probe's layout was named in its rows: 512 lines over 8 and 512 parts.
    few, many = (int(next(iter(rows.values())).get(k, d)) for k, d in (("few_parts", 8), ("many_parts", 512)))
    md.append(f"{many} cache lines ({many * 64 // 1024} KiB, in the first-level cache) chased over {few} and over "
              f"{many} of the 4 KB parts of a 2 MB buffer: where the buffer's 4 KB parts are separate TLB entries the "
              "spread chase misses the first-level TLB at nearly every step, where one 2 MB entry covers them it does "
              "not (tools/tlb-probe.h).")
    md.append("")
    md += table(["buffer", f"ns/step over {few} parts", f"over {many} parts", "slowdown", "TLB entries"], out)
    md.append("")
    hugetlb = [p for p in ("hugetlb", "hugepool") if p in rows]
    split = [PAGE_LABEL.get(p, p) for p in hugetlb if rows[p].get("verdict") == "4 KB entries"]
    if split and len(split) == len(hugetlb):
        return [f"Here {' and '.join(split)} buffers were translated with 4 KB TLB entries, like 4 KB pages "
                "(what a virtual machine gets when its host maps the guest's memory with 4 KB pages): on this "
                "machine huge pages save faults, pinning and page-walk depth, not TLB reach."]
    return []


def sections(run, suites):
    """The sections of the suites touch, pin, translate, cma and tlb (those in suites)."""
    R = Results(run.lines(*suites))
    cost = {}  # filled by touch and pin: page type -> {what: ms per GiB}

    def part(suite, title, body, present, **kw):
        return Section(suite, title, lambda md, plots: body(R, md, plots, cost), present=present, **kw)

    def rows_of(**kw):
        return lambda: bool(R.find(**kw))

    return [
        part("touch", "First-touch cost", section_touch, rows_of(bench="touch", metric="alloc_touch_ns", phase="warm"),
             intro="Time from asking for a buffer to having written one byte into each of its 4 KB pages "
                   "(map + fault + zero), then unmapped again; *warm* = back-to-back repetitions, *cold* = after the "
                   "memory was left idle for some seconds first (worst repetition shown). For hugepool the warm "
                   "repetitions are served from its cache: the pages are already faulted in; its cold case is the "
                   "first allocation after hugepool_trim() (a fresh mapping, populated by hugepool)."),
        part("pin", "Pinning cost", section_pin, rows_of(bench="pin"),
             intro="io_uring fixed-buffer registration pins every page of an already-touched buffer, the same "
                   "work an RDMA memory registration does; unregister unpins. mlock/munlock is a supporting number."),
        part("pin", "Cost per GiB by page type", section_cost_plot, lambda: bool(cost), numbered=False, level=3,
             intro="Measured at the largest size each benchmark ran, in ms per GiB (lower is better)."),
        part("translate", "Translation count", section_translate, rows_of(bench="translate"),
             intro=lambda: translate_intro(R)),
        part("cma", "Cross-process copy (CMA)", section_cma, rows_of(bench="cma"),
             intro="process_vm_readv / process_vm_writev between two processes, the single-copy path intra-node MPI "
                   "uses for large messages; the kernel pins the remote buffer on every call. *local* is the "
                   "caller's buffer, *remote* the other process's. A same-process memcpy gives the copy limit."),
        part("tlb", "TLB reach", section_tlb, lambda: bool(R.find(bench="tlb") or R.find(bench="tlb_entry")),
             intro="Dependent loads through a random cycle over every 64-byte line of the buffer: each step misses "
                   "the caches; with small pages it also misses the TLB and walks the page table. Then whether "
                   "a 2 MB page is one TLB entry on this machine at all."),
    ]

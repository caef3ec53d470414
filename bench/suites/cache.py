#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Report section of the cache suite (bench/suites/cache): cached 4 MB pairs from 1 and 2 threads and
against 8-1024 other cached buffers for every peer (the alloc suite's tables), and 4 MPICH ranks on one
pool (tests/core/ranks_share.c): buffers off 2 MB hugetlb pages per smaps, and time per rank."""
from alloc import section_alloc
from common import PEER_LABEL, PEER_ORDER, Results, Section, ordered, table

RANK_ORDER = ["hugepool", "hugepool-run"] + [p for p in PEER_ORDER if p != "hugepool"]
RANK_LABEL = dict(PEER_LABEL, **{"hugepool": "hugepool (API)", "hugepool-run": "hugepool-run (preload, malloc)",
                                 "libhugetlbfs": "libhugetlbfs (HUGETLB_MORECORE=yes, mmap_max=0)"})


def section_ranks(R, md):
    ranks = [x for x in R.lines if x.get("bench") == "ranks"]
    if not ranks:
        return
    md.append("### Ranks on one pool: buffers off hugetlb pages and time per rank")
    md.append("")
    rows = []
    for peer in ordered({x["peer"] for x in ranks}, RANK_ORDER):
        mine = sorted((x for x in ranks if x["peer"] == peer), key=lambda x: x["rank"])
        rows.append([RANK_LABEL.get(peer, peer), ", ".join(str(x["not_huge"]) for x in mine),
                     ", ".join(f"{x['ms']:.0f}" for x in mine)])
    md += table(["allocator", "buffers off hugetlb pages (ranks in order)", "time per rank, ms (ranks in order)"], rows)
    md.append("")


def sections(run, suites):
    R = Results(run.lines(*suites))

    def body(md, plots):
        section_alloc(R, md, plots, None)
        section_ranks(R, md)

    return [Section("cache", "Threads, hit cost against cached buffers, ranks on one pool", body,
                    present=lambda: any(x.get("bench") in ("alloc", "ranks") for x in R.lines),
                    intro="A pair is one allocation and one free of a 4 MB buffer, no touch (`malloc`+`free` for "
                          "glibc, jemalloc and mimalloc, `get_huge_pages`+`free_huge_pages` for libhugetlbfs on a "
                          "private hugetlbfs mount, `hugepool_alloc`+`hugepool_free` for hugepool); each thread "
                          "times its own loop. Ranks: `tests/core/ranks_share.c` under `mpiexec -n 4`, 200 steps of "
                          "three buffers of 2-8 MB a rank, on a pool of the job's working set + 5% (51 pages); "
                          "hugepool through its API and through `hugepool-run`, the peers through `malloc`. A "
                          "buffer off 2 MB hugetlb pages per /proc/self/smaps (every 16th step) is a fallback.")]

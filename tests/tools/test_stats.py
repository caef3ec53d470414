#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""hugepool stats / hugepool-stats on the files of a real job:
mpiexec -n 4 hugepool-run -o 'DIR/hp.%r' -- an MPI program that mallocs its
message buffers, with a pool that fits, an empty one and one too small.

    test_stats.py HUGEPOOL HUGEPOOL_RUN MPI_PROGRAM WITH_POOL

The merged numbers are checked against the per-rank files read here, and
the peak pool use against the pool the job was given (the kernel's limit)."""
import atexit
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HUGEPOOL, RUN, PROG, WITH_POOL = (os.path.abspath(a) for a in sys.argv[1:5])
# hugepool-stats runs the first python3 on PATH (#!/usr/bin/env python3, so
# that a module's or a venv's Python is used).  The plot needs matplotlib:
# put first on PATH a python3 that has it (this interpreter, else Debian's,
# where python3-matplotlib lives), whatever python3 comes first here.
def _has_matplotlib(python):
    return subprocess.run([python, "-c", "import matplotlib"], capture_output=True).returncode == 0


for _python in (sys.executable, "/usr/bin/python3"):
    if os.path.exists(_python) and _has_matplotlib(_python):
        _bin = os.path.join(tempfile.mkdtemp(prefix="hp-python-"), "python3")
        os.symlink(_python, _bin)
        atexit.register(shutil.rmtree, os.path.dirname(_bin), True)  # leave nothing in /tmp
        os.environ["PATH"] = os.path.dirname(_bin) + os.pathsep + os.environ.get("PATH", "")
        break
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def job(work, pool_pages, fmt="json", extra=()):
    for f in os.listdir(work):
        os.unlink(os.path.join(work, f))
    cmd = [WITH_POOL, str(pool_pages), "mpiexec", "-n", "4", RUN, f"--stats={fmt}", "-o",
           os.path.join(work, "hp.%r"), *extra, "--", PROG]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode == 77:
        print("skip: " + p.stderr.strip())
        sys.exit(77)
    check(p.returncode == 0, f"job with {pool_pages} pool pages ran" + ("" if p.returncode == 0 else p.stderr[-500:]))
    return sorted(os.path.join(work, f) for f in os.listdir(work))


def merged(files, *args):
    p = subprocess.run([HUGEPOOL, "stats", "--json", *args, *files], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"hugepool stats exits 0 ({p.stderr.strip()[:300]})")
    return json.loads(p.stdout) if p.returncode == 0 else {}


def per_rank(files):
    recs = {}
    for f in files:
        recs[int(f.rsplit(".", 1)[1])] = json.loads(open(f).read())
    return recs


ROW = re.compile(r"^  (?P<label>\S.*?) +(?P<value>\d+(?:\.\d+)?)(?: (?P<unit>B|KiB|MiB|GiB|TiB))?$")


def text_table(files, txt):
    """The merged text table names counters as the per-rank text records do,
    prints sizes in human units, and says "all" where every rank agrees."""
    labels = set()
    for f in files:
        for line in open(f):
            m = ROW.match(line.rstrip("\n"))
            if m:
                labels.add(m.group("label"))
    check("bytes mapped (peak)" in labels and "allocations" in labels, f"per-rank text labels read ({len(labels)})")
    lines = txt.splitlines()
    head = [i for i, l in enumerate(lines) if l.split()[:1] == ["counter"]]
    check(len(head) == 1, "one counter table")
    rows = lines[head[0] + 1:] if head else []
    rows = [r for r in rows if r.strip() and not r.strip().startswith("plot:")]
    named = [r for r in rows if any(r.startswith("  " + lab + " ") for lab in labels)]
    check(rows and named == rows, "every merged row is named as in the per-rank records: " +
          "; ".join(r.strip()[:40] for r in rows if r not in named))
    check(not any(re.match(r"^  [a-z]+(_[a-z0-9]+)+ ", r) for r in rows), "no JSON key names in the text table")
    peak = [r for r in rows if r.startswith("  bytes mapped (peak) ")]
    check(peak and re.search(r" (KiB|MiB|GiB) ", peak[0]) is not None, f"sizes in human units: {peak[:1]}")
    for r in rows:
        cols = r.split()
        same = None
        m = re.search(r"(\S+(?: [KMGT]?i?B)?) +(\S+(?: [KMGT]?i?B)?) +(\S+(?: [KMGT]?i?B)?) +(all|\d+ / \d+)$", r)
        if m:
            same = m.group(1) == m.group(3)
        check(m is not None and (m.group(4) == "all") == same,
              f"rank column says 'all' exactly when min equals max: {' '.join(cols)}")


def timed(work, base):
    """Ranks that ran one after another: their peaks are not added up.  Ranks
    0 and 1 overlap (10 + 20 pages), rank 2 runs after both (25 pages): the
    node's peak is 30, not 55.  Then a second job's rank 0: a warning that
    two files carry one label."""
    page = 2 << 20
    files = []
    for i, (rank, pages, start, end, job_id) in enumerate(((0, 10, 100.0, 200.0, "7"), (1, 20, 150.0, 250.0, "7"),
                                                         (2, 25, 300.0, 400.0, "7"), (0, 5, 500.0, 600.0, "8"))):
        rec = dict(base, pid=1000 + i, rank=rank, bytes_mapped_peak=pages * page, started=start, written=end,
                   job=job_id, host="nodeA", preload_fallback_bytes=0)
        path = os.path.join(work, f"timed.{i}")
        with open(path, "w") as f:
            f.write(json.dumps(rec) + "\n")
        files.append(path)
    rep = merged(files[:3])
    node = rep.get("nodes", {}).get("nodeA", {})
    check(node.get("pool_pages_at_peak") == 30 and node.get("hugepages_needed") == 30,
          f"ranks one after another: peak {node.get('pool_pages_at_peak')}, needed {node.get('hugepages_needed')}"
          " = 30 (10 + 20 together, 25 later), not the sum 55")
    check(node.get("ranks_ran_together") is False, "the node's ranks are reported as not all running at once")
    p = subprocess.run([HUGEPOOL + "-stats", *files[:3]], capture_output=True, text=True)
    check("did not all run at the same time on: nodeA" in p.stdout, "the text report says which ranks ran apart")
    p = subprocess.run([HUGEPOOL + "-stats", *files], capture_output=True, text=True)
    check(p.returncode == 0 and "rank 0 on nodeA comes from 2 files" in p.stderr and "job 7/8" in p.stderr,
          f"a rank label from two jobs: warned ({p.stderr.strip()[:300]})")
    for f in files:
        os.unlink(f)


def broken_pipe(files):
    """hugepool-stats ... | head: the reader gone, no traceback, exit 0."""
    p = subprocess.Popen([HUGEPOOL + "-stats", *files], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # the only reader: every write fails with EPIPE
    err = p.stderr.read().decode()
    rc = p.wait(timeout=60)
    check(rc == 0 and "Traceback" not in err and "BrokenPipe" not in err, f"output piped to a closed reader: exit {rc}, "
          f"stderr {err[-300:]!r}")


def main():
    if subprocess.run(["sh", "-c", "command -v mpiexec"], capture_output=True).returncode != 0:
        print("skip: no mpiexec")
        return 77
    work = tempfile.mkdtemp(prefix="hp-stats-")
    try:
        # A pool that fits every rank's buffers (4 ranks x 2 x 16 MiB, cached).
        files = job(work, 160)
        check(len(files) == 4, f"one file per rank ({len(files)})")
        recs = per_rank(files)
        rep = merged(files)
        check(rep.get("ranks") == 4, "4 ranks merged")
        for key in ("allocs", "cache_hits", "bytes_mapped_peak"):
            vals = [recs[r][key] for r in sorted(recs)]
            c = rep.get("counters", {}).get(key, {})
            check(c.get("min") == min(vals) and c.get("max") == max(vals) and c.get("median") == statistics.median(vals),
                  f"{key}: min/median/max over ranks {vals}")
        peak = sum((recs[r]["bytes_mapped_peak"] + (2 << 20) - 1) // (2 << 20) for r in recs)
        check(rep.get("pool_pages_at_peak") == peak and 0 < peak <= 160,
              f"pool pages at peak {rep.get('pool_pages_at_peak')} = sum of per-rank peaks, within the 160-page pool")
        kernel = sum(recs[r]["kernel_private_hugetlb_bytes"] for r in recs) // (2 << 20)
        check(kernel <= peak, f"the kernel's hugetlb pages at exit ({kernel}) are within the peak ({peak})")
        check(rep.get("ranks_fell_back") == [] and rep.get("ranks_failed") == [], "no rank fell back or failed")
        # Each record says where it ran: the host, the rank on its node, hugepool's version.
        host = socket.gethostname()
        check(all(recs[r].get("host") == host for r in recs), f"every record names this host ({host})")
        check(sorted(recs[r].get("local_rank") for r in recs) == [0, 1, 2, 3], "local ranks 0-3 on the one node")
        check(all(re.fullmatch(r"\d+\.\d+\.\d+", recs[r].get("version", "")) for r in recs), "a version in every record")
        node = rep.get("nodes", {}).get(host, {})
        check(sorted(node.get("ranks", [])) == [0, 1, 2, 3] and node.get("pool_pages_at_peak") == peak
              and node.get("pool_pages", 0) >= 160, f"one node: its ranks, its peak {peak} and its pool")
        # A file given twice, or a copy of one under another name, is refused.
        for again, what in ((files[0], "given twice"), (os.path.join(work, "copy"), "the same process")):
            if again != files[0]:
                shutil.copy(files[0], again)
            p = subprocess.run([HUGEPOOL, "stats", "--json", *files, again], capture_output=True, text=True)
            check(p.returncode == 1 and what in p.stderr and not p.stdout, f"a file seen already: refused ({what})")
            if again != files[0]:
                os.unlink(again)

        # The text format merges to the same report.
        tfiles = job(work, 160, fmt="text")
        trep = merged(tfiles)
        check(trep.get("ranks") == 4 and trep["counters"]["allocs"]["max"] == rep["counters"]["allocs"]["max"],
              "text statistics files merge like JSON ones")
        txt = subprocess.run([HUGEPOOL + "-stats", *tfiles], capture_output=True, text=True).stdout
        check("pool pages at peak" in txt and "allocations" in txt, "hugepool-stats prints a text report")
        text_table(tfiles, txt)
        broken_pipe(tfiles)
        p = subprocess.run([HUGEPOOL + "-stats", "--version"], capture_output=True, text=True)
        check(p.returncode == 0 and re.fullmatch(r"hugepool-stats \d+\.\d+\.\d+\n", p.stdout) is not None,
              f"hugepool-stats --version: {p.stdout!r}")

        # An empty pool: every rank falls back, and the report names them.
        files = job(work, 0)
        rep = merged(files)
        check(rep.get("ranks_fell_back") == [0, 1, 2, 3], f"empty pool: all ranks fell back ({rep.get('ranks_fell_back')})")

        # A pool too small for all: the ranks named are exactly those whose files show fallbacks.
        files = job(work, 20)
        recs = per_rank(files)
        want = sorted(r for r in recs if recs[r].get("preload_fallbacks", 0) > 0)
        png = os.path.join(work, "peak.png")
        rep = merged(files, "--png", png)
        check(want and rep.get("ranks_fell_back") == want, f"small pool: fallen-back ranks {want} named")
        # Each rank's own peak is within the pool; their sum (the report's upper
        # bound) need not be, as ranks give cached pages back for others to map.
        page = rep.get("page_size", 2 << 20)
        peaks = [-(-recs[r].get("bytes_mapped_peak", 0) // page) for r in recs]
        check(peaks and max(peaks) <= 20, f"small pool: each rank's peak within the 20 pages given ({peaks})")
        check(rep.get("pool_pages_at_peak") == sum(peaks), f"small pool: the report's peak is the sum of {peaks}")
        node = rep.get("nodes", {}).get(socket.gethostname(), {})
        need = sum(-(-(recs[r].get("bytes_mapped_peak", 0) + recs[r].get("preload_fallback_bytes", 0)) // page)
                   for r in recs)
        check(node.get("hugepages_needed") == need > 20 and node.get("ranks_fell_back") == want,
              f"small pool: the node should have had {need} pages, more than the 20 given")
        with open(png, "rb") as f:
            check(f.read(8) == b"\x89PNG\r\n\x1a\n", "--png writes a PNG")
        # The first python3 on PATH lacks matplotlib (python3 -S: no
        # dist-packages): hugepool-stats finds Debian's, which has it.
        if _has_matplotlib("/usr/bin/python3"):
            bare = os.path.join(work, "bare-python")
            os.mkdir(bare)
            with open(os.path.join(bare, "python3"), "w") as f:
                f.write('#!/bin/sh\nexec /usr/bin/python3 -S "$@"\n')
            os.chmod(os.path.join(bare, "python3"), 0o755)
            os.unlink(png)
            env = dict(os.environ, PATH=bare + os.pathsep + os.environ.get("PATH", ""))
            p = subprocess.run([HUGEPOOL + "-stats", "--png", png, *files], capture_output=True, text=True, env=env)
            check(p.returncode == 0 and os.path.exists(png),
                  f"--png with a python3 without matplotlib first on PATH: Debian's is used ({p.stderr.strip()[:300]})")
            # With none to turn to, it names the interpreters it tried.
            env["HUGEPOOL_STATS_REEXEC"] = "1"
            p = subprocess.run([HUGEPOOL + "-stats", "--png", png, *files], capture_output=True, text=True, env=env)
            check(p.returncode == 2 and "(running hugepool-stats)" in p.stderr and "python3-matplotlib" in p.stderr,
                  f"--png without matplotlib anywhere: exit 2, the interpreter named ({p.stderr.strip()[:300]})")

        # Each record says when its process started and when it wrote the
        # record (the kernel's start time, the wall clock at exit).
        now = time.time()
        check(all(0 < now - 600 < recs[r]["started"] <= recs[r]["written"] <= now + 1 for r in recs),
              f"records carry their process's start and end: {[(recs[r]['started'], recs[r]['written']) for r in recs]}")
        timed(work, recs[0])

        # Files of processes that made no hugepool allocation are ignored.
        empty = os.path.join(work, "hp.norank")
        open(empty, "w").close()
        rep = merged(files + [empty])
        check(rep.get("ranks") == 4 and rep.get("ignored_files") == [empty], "an empty statistics file is ignored")
        # A process whose only large request went to glibc beyond the pool
        # share (HUGEPOOL_HOLD) is one of the job's, its rows merged.
        held = os.path.join(work, "hp.held")
        rec = {k: 0 if isinstance(v, (int, float)) and not isinstance(v, bool) else v for k, v in recs[0].items()}
        rec.update(pid=99999, rank=9, started=recs[0]["started"], written=recs[0]["written"],
                   preload_held_back=1, preload_held_back_bytes=3 << 29)
        with open(held, "w") as f:
            f.write(json.dumps(rec) + "\n")
        rep = merged(files + [held])
        check(rep.get("ranks") == 5 and not rep.get("ignored_files"),
              f"a process that only held a request back is counted ({rep.get('ranks')}, {rep.get('ignored_files')})")
        p = subprocess.run([HUGEPOOL + "-stats", *files, held], capture_output=True, text=True)
        check("preload: beyond the pool share, to glibc" in p.stdout and "1.5 GiB" in p.stdout,
              f"the text report names the held-back rows with sizes ({p.stdout[-600:]})")
        os.unlink(held)
        bad = os.path.join(work, "garbage")
        open(bad, "w").write("not statistics\n")
        p = subprocess.run([HUGEPOOL + "-stats", bad], capture_output=True, text=True)
        check(p.returncode == 1 and "not a hugepool statistics file" in p.stderr, "a foreign file: clear error")
    finally:
        shutil.rmtree(work)
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

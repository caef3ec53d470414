#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The suite registry holds: every line of bench/suites/list names an executable
runner and a report module with sections(run, suites), every runner in
bench/suites/ is named by a line, bench/run lists the suites in the list's order,
and bench/report.py renders an empty run folder of every suite without error.

usage: check_suites.py SOURCE_DIR
"""
import importlib
import os
import re
import subprocess
import sys
import tempfile


def main():
    src = os.path.abspath(sys.argv[1])
    suites_dir = os.path.join(src, "bench", "suites")
    sys.path.insert(0, suites_dir)
    bad = []
    lines = []
    with open(os.path.join(suites_dir, "list")) as f:
        for n, line in enumerate(f, 1):
            fields = line.split(None, 4)
            if not fields or fields[0].startswith("#"):
                continue
            if len(fields) < 5:
                bad.append(f"list:{n}: want NAME RUNNER REPORT TARGETS ABOUT, got {line.strip()!r}")
                continue
            lines.append(fields)
    names = [f[0] for f in lines]
    if len(set(names)) != len(names):
        bad.append(f"list: a suite named twice: {names}")
    for name, runner, report, _, _ in lines:
        path = os.path.join(suites_dir, runner)
        if not os.access(path, os.X_OK):
            bad.append(f"{name}: runner bench/suites/{runner} missing or not executable")
        try:
            if not callable(getattr(importlib.import_module(report), "sections", None)):
                bad.append(f"{name}: bench/suites/{report}.py has no sections(run, suites)")
        except Exception as e:  # an import error is the finding
            bad.append(f"{name}: bench/suites/{report}.py does not import: {e}")
    runners = {f[1] for f in lines}
    for entry in sorted(os.listdir(suites_dir)):
        path = os.path.join(suites_dir, entry)
        if os.path.isfile(path) and os.access(path, os.X_OK) and "." not in entry and entry not in runners:
            bad.append(f"bench/suites/{entry}: a runner no line of the list names")
    listed = subprocess.run([os.path.join(src, "bench", "run")], capture_output=True, text=True).stdout
    order = [m.group(1) for m in re.finditer(r"^ +\d+ (\S+)", listed, re.M)]
    if order != names:
        bad.append(f"bench/run lists {order}, the list has {names}")
    with tempfile.TemporaryDirectory(prefix="hugepool-suites-") as out:
        for name in names:
            os.mkdir(os.path.join(out, name))
        p = subprocess.run(["/usr/bin/python3", os.path.join(src, "bench", "report.py"), out], capture_output=True,
                           text=True)
        if p.returncode != 0:
            bad.append(f"report.py on an empty run of every suite: exit {p.returncode}: {p.stderr[-2000:]}")
    for b in bad:
        print(b)
    if bad:
        return 1
    print(f"ok: {len(names)} suites, each with a runner and a report module")
    return 0


if __name__ == "__main__":
    sys.exit(main())

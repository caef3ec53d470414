#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The man pages and --help agree: the same options for each program, every
public function of hugepool.h in hugepool(3), every HUGEPOOL_* variable of
the option table documented, and each page renders without a groff warning.

Each function also has its page name: a link NAME.3.gz to hugepool.3.gz
among the compressed pages that are installed (man hugepool_alloc).

    test_man.py MAN_DIR SOURCE_DIR HUGEPOOL HUGEPOOL_RUN HUGEPOOL_RESERVE HUGEPOOL_DEMO"""
import os
import re
import subprocess
import sys

MAN, SRC, HUGEPOOL, RUN, RESERVE, DEMO = sys.argv[1:7]
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


OPT = re.compile(r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9-]*)")


def help_options(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    text = p.stdout + p.stderr
    return {o for o in OPT.findall(text)}, p.returncode


def man_options(page):
    text = open(os.path.join(MAN, page)).read().replace("\\-", "-")
    m = re.search(r"^\.SH OPTIONS\n(.*?)(?=^\.SH )", text, re.S | re.M)
    section = m.group(1) if m else ""
    return set(re.findall(r"\\fB(--?[A-Za-z][A-Za-z0-9-]*)", section))


def compare(name, cmd, page, ignore=()):
    got, rc = help_options(cmd)
    got -= set(ignore)
    man = man_options(page) - set(ignore)
    check(rc == 0, f"{name} --help exits 0")
    check(got == man, f"{name}: --help and {page} list the same options"
          + ("" if got == man else f" (only in --help: {sorted(got - man)}, only in the page: {sorted(man - got)})"))


def main():
    compare("hugepool-run", [RUN, "--help"], "hugepool-run.1")
    compare("hugepool-reserve", [RESERVE, "--help"], "hugepool-reserve.1")
    compare("hugepool doctor", [HUGEPOOL, "doctor", "--help"], "hugepool.1")
    compare("hugepool-stats", [HUGEPOOL, "stats", "--help"], "hugepool-stats.1")
    compare("hugepool-demo", [DEMO, "--help"], "hugepool-demo.1", ignore=("--help",))

    header = open(os.path.join(SRC, "include/hugepool/hugepool.h")).read()
    funcs = set(re.findall(r"^HUGEPOOL_API\b.*?\b(hugepool_\w+)\(", header, re.M))
    page3 = open(os.path.join(MAN, "hugepool.3")).read()
    synopsis = re.search(r"^\.SH SYNOPSIS\n(.*?)(?=^\.SH )", page3, re.S | re.M).group(1)
    documented = set(re.findall(r"\b(hugepool_\w+)\(", synopsis))
    check(funcs and funcs == documented, "hugepool(3) lists every public function of hugepool.h, and only those"
          + ("" if funcs == documented else f" (missing: {sorted(funcs - documented)}, extra: {sorted(documented - funcs)})"))
    names = re.search(r"^\.SH NAME\n(.*?)(?=^\.SH )", page3, re.S | re.M).group(1)
    check(all(f in names for f in funcs), "hugepool(3) NAME names every function (so man finds the page by each)")
    links = os.path.join(os.path.dirname(MAN), "man-gz", "links")
    bad = [f for f in sorted(funcs) if os.readlink(os.path.join(links, f + ".3.gz")) != "hugepool.3.gz"] \
        if all(os.path.islink(os.path.join(links, f + ".3.gz")) for f in funcs) else sorted(funcs)
    check(funcs and not bad, f"each function's page name links to hugepool.3.gz ({len(funcs)}; wrong: {bad[:5]})")

    mpi_header = open(os.path.join(SRC, "include/hugepool/mpi.h")).read()
    mpi_funcs = set(re.findall(r"^HUGEPOOL_API\b.*?\b(hugepool_mpi_\w+)\(", mpi_header, re.M))
    page_mpi = open(os.path.join(MAN, "hugepool_mpi.3")).read()
    mpi_synopsis = re.search(r"^\.SH SYNOPSIS\n(.*?)(?=^\.SH )", page_mpi, re.S | re.M).group(1)
    mpi_documented = set(re.findall(r"\b(hugepool_mpi_\w+)\(", mpi_synopsis))
    check(mpi_funcs and mpi_funcs == mpi_documented, "hugepool_mpi(3) lists every public function of mpi.h"
          + ("" if mpi_funcs == mpi_documented else f" (missing: {sorted(mpi_funcs - mpi_documented)})"))
    mpi_links = [f for f in sorted(mpi_funcs) if os.path.islink(os.path.join(links, f + ".3.gz"))
                 and os.readlink(os.path.join(links, f + ".3.gz")) == "hugepool_mpi.3.gz"]
    check(mpi_funcs and mpi_links == sorted(mpi_funcs), f"each MPI function's page name links to hugepool_mpi.3.gz "
          f"({len(mpi_links)} of {len(mpi_funcs)})")

    table = os.path.join(SRC, "lib/option-table.c")
    options = open(table if os.path.exists(table) else os.path.join(SRC, "lib/options.c")).read()
    env = set(re.findall(r'\("(HUGEPOOL_[A-Z_]+)"|\{"(HUGEPOOL_[A-Z_]+)"', options))
    env = {a or b for a, b in env}
    pages = "".join(open(os.path.join(MAN, p)).read() for p in ("hugepool.3", "hugepool-run.1")).replace("\\-", "-")
    missing = sorted(v for v in env if v not in pages.replace("\\fB", "").replace("\\fR", ""))
    check(env and not missing, f"every HUGEPOOL_* variable of the option table is documented ({len(env)}; missing {missing})")

    for page in sorted(os.listdir(MAN)):
        p = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", os.path.join(MAN, page)], capture_output=True,
                           text=True)
        check(p.returncode == 0 and not p.stderr.strip(), f"{page} renders without groff warnings {p.stderr.strip()[:200]}")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

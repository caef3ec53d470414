#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""The one reporter: a bench/run folder to results.json, report.md and its plots.

    report.py DIR [--title TEXT] [--plot-prefix PREFIX]

Reads DIR/run.jsonl (the driver's machine, suite and end lines) and DIR/SUITE/ of every suite that ran;
each suite's module bench/suites/REPORT.py (bench/suites/list names it) writes its sections through
sections(run, suites), numbered by the suite's line in the list.  Every sentence the report prints about a
comparison is computed from the numbers of this one run.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "suites"))

from common import Plots, Section, load, table  # noqa: E402


def registry():
    """[(name, report module)] from bench/suites/list, in its order."""
    suites = []
    with open(os.path.join(HERE, "suites", "list")) as f:
        for line in f:
            fields = line.split()
            if fields and not fields[0].startswith("#"):
                suites.append((fields[0], fields[2]))
    return suites


class Run:
    """One bench/run folder: the driver's lines, and the suites that left a folder in it."""

    def __init__(self, out, suites):
        self.out = out
        driver = load(os.path.join(out, "run.jsonl")) if os.path.exists(os.path.join(out, "run.jsonl")) else []
        self.machine = next((x for x in driver if x.get("bench") == "machine"), {})
        self.end = ([x for x in driver if x.get("bench") == "end"] or [{}])[-1]
        self.suite_lines = [x for x in driver if x.get("bench") == "suite"]
        self.ran = [name for name, _ in suites if os.path.isdir(os.path.join(out, name))]
        self.all = driver + self.lines(*self.ran)

    def dir(self, suite):
        return os.path.join(self.out, suite)

    def lines(self, *suites):
        """The JSON lines of these suites' results.jsonl (those that have one)."""
        out = []
        for s in suites:
            path = os.path.join(self.out, s, "results.jsonl")
            if os.path.exists(path):
                out += load(path)
        return out


def section_machine(run, md):
    m, end = run.machine, run.end
    md += table(["", ""], [
        ["CPU", f"{m.get('cpu', '?')} ({m.get('cpus', '?')} CPUs)"],
        ["kernel", m.get("kernel", "?")],
        ["memory", m.get("memory", "?")],
        ["virtualised", m.get("virtualised", "?")],
        ["THP enabled / defrag", f"{m.get('thp', '?')} / {m.get('thp_defrag', '?')}"],
        ["glibc / MPICH / UCX", f"{m.get('glibc', '?')} / {m.get('mpich', '?')} / {m.get('ucx', '?')}"],
        ["mode", m.get("mode", "?")],
        ["suites", m.get("suites", " ".join(run.ran))],
        ["started / ended (UTC)", f"{m.get('date', '?')} / {end.get('date', '?')}"],
        ["load average at start / end", f"{m.get('load_start', '?')} / {end.get('load_end', '?')}"],
    ])
    if run.suite_lines:
        md += ["", "Suites, in the order they ran (*load after*: the 1-minute load average when one ended).", ""]
        md += table(["suite", "seconds", "exit status", "load after"],
                    [[s["suite"], s["seconds"], s["rc"], s.get("load_after", "–")] for s in run.suite_lines])
    steps = [x for x in run.all if x.get("bench") == "step"]
    if steps:
        md.append("")
        md.append(f"Steps (total {sum(s['seconds'] for s in steps)} s). Before each step the driver waited (up to a "
                  "limit) for the shared machine to have no other runnable process; *other runnable* is what was "
                  "still running when the step started, *load after* the 1-minute load average when it ended.")
        md.append("")
        md += table(["step", "seconds", "waited for quiet (s)", "other runnable at start", "load after"],
                    [[s["step"], s["seconds"], s.get("waited_s", "–"), s.get("busy_at_start", "–"),
                      s.get("load_after", "–")] for s in steps])
    md.append("")
    md.append("**Noise.** Every number is the median of repeated measurements in this one run, with the "
              "fastest and slowest repetition in brackets as [min–max]. Compare numbers within this report; "
              "absolute times depend on the machine and on whatever else it was doing (the load averages above).")
    md.append("")


def section_skips(run, md):
    skips = [x for x in run.all if "skip" in x]
    if not skips:
        md.append("Nothing was skipped.")
    else:
        md += table(["benchmark", "what", "why"], [[s.get("bench", "?"), s.get("skip", "?"), s.get("reason", "?")]
                                                  for s in skips])
    md.append("")


def sections(run, suites):
    """Every section of this run: the machine, the skips, then each module's, in the list's order."""
    number = {name: i + 1 for i, (name, _) in enumerate(suites)}
    out = [Section(None, "Machine and run", lambda md, plots: section_machine(run, md), numbered=False),
           Section(None, "Skipped", lambda md, plots: section_skips(run, md), numbered=False)]
    modules = []
    for name, module in suites:
        if name in run.ran and module not in modules:
            modules.append(module)
    for module in modules:
        mine = [name for name, m in suites if m == module and name in run.ran]
        out += __import__(module).sections(run, mine)
    out[2:] = sorted(out[2:], key=lambda s: number[s.suite])
    return out, number


def write_sections(run, suites, md, plots):
    secs, number = sections(run, suites)
    for sec in secs:
        if not sec.present():
            continue
        md.append("#" * sec.level + " " + (f"{number[sec.suite]}. " if sec.numbered else "") + sec.title)
        if sec.intro:
            md.append(sec.intro() if callable(sec.intro) else sec.intro)
            md.append("")
        sec.body(md, plots)


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
    suites = registry()
    run = Run(outdir, suites)
    rows = [x for x in run.all if "metric" in x]
    skips = [x for x in run.all if "skip" in x]
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump({"machine": run.machine, "end": run.end, "suites": run.suite_lines,
                   "steps": [x for x in run.all if x.get("bench") == "step"], "skipped": skips,
                   "info": [x for x in run.all if "info" in x], "results": rows}, f, indent=1)
    plots = Plots(outdir, prefix)
    md = [f"# {title}", ""]
    write_sections(run, suites, md, plots)
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
    print(f"report.py: {len(run.ran)} suites, {len(rows)} results, {len(skips)} skipped, {len(plots.made)} plots -> "
          f"{os.path.join(outdir, 'report.md')}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

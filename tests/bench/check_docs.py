#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The benchmark pages stay readable and the data stays out of the tree.

1. Every relative link and image in README.md, bench/README.md and
   bench/RESULTS.md names a file or folder that exists.
2. Every plot in bench/figures/ is shown by bench/RESULTS.md.
3. Git tracks no results under bench/: no *.pyc or __pycache__, no
   results*/ folder, no .jsonl, .json, .txt or .png outside bench/figures/.

usage: check_docs.py SOURCE_DIR
"""
import os
import re
import subprocess
import sys

PAGES = ["README.md", "bench/README.md", "bench/RESULTS.md"]
DATA = (".jsonl", ".json", ".txt", ".png", ".pyc")


def links(text):
    for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text):
        yield m.group(1)


def main():
    src = os.path.abspath(sys.argv[1])
    bad = []
    shown = set()
    for page in PAGES:
        path = os.path.join(src, page)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for target in links(text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a web address, an anchor on the same page
            rel = target.split("#", 1)[0]
            full = os.path.normpath(os.path.join(os.path.dirname(path), rel))
            if not os.path.exists(full):
                bad.append(f"{page}: link to {target}: no such file")
            shown.add(os.path.relpath(full, src))
    figures = os.path.join(src, "bench", "figures")
    for name in sorted(os.listdir(figures)) if os.path.isdir(figures) else []:
        if f"bench/figures/{name}" not in shown:
            bad.append(f"bench/figures/{name}: not shown by bench/RESULTS.md")
    if os.path.exists(os.path.join(src, ".git")):
        tracked = subprocess.run(["git", "-C", src, "ls-files", "bench"], check=True, capture_output=True,
                                 text=True).stdout.split()
        for f in tracked:
            parts = f.split("/")
            if "__pycache__" in parts or any(p.startswith("results") and p != parts[-1] for p in parts):
                bad.append(f"{f}: results tracked by git")
            elif f.endswith(DATA) and not f.startswith("bench/figures/") and parts[-1] != "CMakeLists.txt":
                bad.append(f"{f}: data tracked by git (raw runs are not kept in the tree)")
    else:
        print("no .git: the tracked-files check is skipped")
    for b in bad:
        print(b)
    if bad:
        return 1
    print(f"ok: links of {len(PAGES)} pages, {len(shown)} targets; no results tracked under bench/")
    return 0


if __name__ == "__main__":
    sys.exit(main())

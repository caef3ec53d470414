#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The privileged build sees only what it needs, by names that cannot be
confused, and is hardened throughout.

1. Every file of setuid-helper/ includes, in quotes, only its own folder's
   headers (X.h, or X.h generated from its X.h.in into the helper's build
   directory) and lib/size.h by its relative path ("../lib/size.h").
2. No object of a privileged target (everything built in the helper's build
   directory: the three helper variants, the Slurm plugins, the parsers'
   library they link; and lib/size.c, the size parser they link) has lib/ or
   any other project folder but setuid-helper/ (and its build directory, for
   the generated headers) on its include path, and each
   is built with every hardening flag of cmake/hardening.cmake.
3. The parsers are compiled once: lib/size.c and setuid-helper/parse.c have
   one compile command each (the fuzzer's own build aside, which is not in
   compile_commands.json).

usage: privileged_build.py SOURCE_DIR BUILD_DIR
"""
import json
import os
import re
import shlex
import sys

ALLOWED_LIB = {"../lib/size.h"}
HARDEN = ["-D_FORTIFY_SOURCE=3", "-O2", "-fstack-protector-strong", "-fstack-clash-protection", "-fcf-protection"]


def include_problems(src):
    helper = os.path.join(src, "setuid-helper")
    own = {f for f in os.listdir(helper) if f.endswith(".h")}
    own |= {f[:-3] for f in os.listdir(helper) if f.endswith(".h.in")}
    bad = []
    for name in sorted(os.listdir(helper)):
        if not name.endswith((".c", ".h")):
            continue
        with open(os.path.join(helper, name), encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                m = re.match(r'\s*#\s*include\s*"([^"]+)"', line)
                if m and m.group(1) not in own and m.group(1) not in ALLOWED_LIB:
                    bad.append(f"setuid-helper/{name}:{n}: includes \"{m.group(1)}\"")
    return bad


def include_dirs(args):
    dirs = []
    for i, a in enumerate(args):
        for flag in ("-I", "-isystem", "-iquote"):
            if a == flag and i + 1 < len(args):
                dirs.append(args[i + 1])
            elif a.startswith(flag) and len(a) > len(flag):
                dirs.append(a[len(flag):])
    return [os.path.realpath(d) for d in dirs]


def build_problems(src, build):
    with open(os.path.join(build, "compile_commands.json"), encoding="utf-8") as f:
        entries = json.load(f)
    privileged = os.path.realpath(os.path.join(build, "setuid-helper"))
    helper_src = os.path.realpath(os.path.join(src, "setuid-helper"))
    src = os.path.realpath(src)
    bad, seen = [], 0
    shared_parsers = {os.path.join(src, "lib", "size.c"), os.path.join(src, "setuid-helper", "parse.c")}
    compiles = {f: 0 for f in shared_parsers}
    for e in entries:
        file = os.path.realpath(os.path.join(e["directory"], e["file"]))
        if file in compiles:
            compiles[file] += 1
        if os.path.realpath(e["directory"]) != privileged and file not in shared_parsers:
            continue
        seen += 1
        args = shlex.split(e["command"]) if "command" in e else e["arguments"]
        what = os.path.relpath(e["file"], src)
        for d in include_dirs(args):
            if d.startswith(src + os.sep) and d not in (helper_src, privileged):
                bad.append(f"{what}: include path {os.path.relpath(d, src)}/ in a privileged build")
        missing = [h for h in HARDEN if h not in args]
        if missing:
            bad.append(f"{what}: built without {' '.join(missing)}")
    for f, n in sorted(compiles.items()):
        if n != 1:
            bad.append(f"{os.path.relpath(f, src)}: compiled {n} times (once is the rule)")
    if seen < 10:
        bad.append(f"only {seen} privileged compile commands in {build}/compile_commands.json")
    return bad, seen


def main():
    src, build = sys.argv[1], sys.argv[2]
    bad = include_problems(src)
    more, seen = build_problems(src, build)
    bad += more
    for b in bad:
        print(b)
    if bad:
        return 1
    print(f"ok: setuid-helper includes, {seen} privileged compile commands")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A plain Fortran ALLOCATE of 64 MiB: on 4 KB or THP pages alone, on 2 MB
# hugetlb pages under hugepool-run (from the program's own smaps).
#   plain-allocate.sh HUGEPOOL-RUN PROGRAM   (under with-pool)
set -uo pipefail
run=$1 prog=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
alone=$("$prog") || fail "$prog exited $?"
echo "alone:             $alone"
under=$("$run" "$prog") || fail "hugepool-run $prog exited $?"
echo "under hugepool-run: $under"
[[ $alone =~ ^page_kb\ ([0-9]+)\ hugetlb_kb\ ([0-9]+)\ sum_ok\ 1$ ]] || fail "unexpected output alone"
((BASH_REMATCH[1] != 2048 || BASH_REMATCH[2] == 0)) || fail "already on hugetlb pages without hugepool-run: no control"
[[ $under =~ ^page_kb\ 2048\ hugetlb_kb\ ([0-9]+)\ sum_ok\ 1$ ]] || fail "not on 2 MB pages under hugepool-run"
((BASH_REMATCH[1] >= 65536)) || fail "only ${BASH_REMATCH[1]} kB on hugetlb pages"
echo "ok: the ALLOCATE landed on hugetlb pages under hugepool-run only"

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ranks-share.sh PROGRAM SOURCE_DIR: 4 MPICH ranks, each with at most 24 MB
# (12 pages) live, on a pool of 4 x 12 pages + 5% (51 pages; bench/pool-run
# holds the pool lock and restores the pool).  HUGEPOOL_POLICY=small counts
# a shortage as a fallback instead of failing the rank.  UCX is kept off
# the pool (its SysV segments go to hugetlb pages when the pool has room).
set -euo pipefail
prog=$1 src=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
rc=0
"$src/bench/pool-run" 51 0 -- mpiexec -n 4 env HUGEPOOL_POLICY=small HUGEPOOL_WARN=0 UCX_SYSV_HUGETLB_MODE=n \
  UCX_MEM_MALLOC_HOOKS=n UCX_MEM_MALLOC_RELOC=n "$prog" 200 >"$out" || rc=$?
cat "$out"
n=$(grep -c '"rank"' "$out" || true)
[[ $n == 4 ]] || { echo "FAIL: $n rank reports, want 4"; exit 1; }
if grep -Eq '"(fallbacks|failures|not_huge)": [1-9]' "$out"; then echo "FAIL: a rank fell back or failed"; exit 1; fi
[[ $rc == 0 ]] || { echo "FAIL: exit status $rc"; exit 1; }
echo "PASS"

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# mpi.sh MPIEXEC PROGRAM [mpiexec options...]: runs the Fortran MPI test with
# 2 ranks on a pool of exactly 64 free 2 MB pages (the pool lock held, the
# pool restored) and checks that every rank passed and the pool came back.
set -euo pipefail
mpiexec=$1 prog=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../tests/mpi/pool.sh"
pool_take 64
timeout 240 "$mpiexec" "$@" -n 2 "$prog" >"$work/out" 2>&1 && rc=0 || rc=$?
cat "$work/out"
((rc == 0)) || fail "mpiexec exited $rc"
[[ $(grep -c "^all checks passed" "$work/out") -eq 2 ]] || fail "not every rank passed"
[[ $(avail) -eq 64 ]] || fail "the pool has $(avail) free pages after the run, not 64"
echo "ok: 2 ranks"

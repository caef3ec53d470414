#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A rank that finishes early leaves nothing cached that another rank needs:
# under hugepool-run, MPI_Finalize gives the rank's cached pages back to the
# node's pool before it waits for the others (finalize_trim.c; the free
# count is the kernel's).  With --mpi off nothing gives them back, which
# shows the test can fail.
#   finalize-trim.sh MPIEXEC PROGRAM HUGEPOOL_RUN
set -euo pipefail
mpiexec=$1 prog=$2 run=$3
source "$(dirname "$0")/pool.sh"
want=48 # rank 0's 16-page buffer and what MPICH mallocs at 1 MiB and up
pool_take "$want"

go() { # name, launcher words...
  local name=$1
  shift
  rm -f "$work/flag"
  timeout 120 "$mpiexec" -n 2 "$@" "$prog" "$work/flag" >"$work/$name" 2>"$work/$name.err" || true
  cat "$work/$name" "$work/$name.err"
}
go run "$run" --
[[ $(grep -c ' bad 0$' "$work/run") -eq 2 ]] || fail "hugepool-run: rank 0's cached pages not given back at MPI_Finalize"
go off "$run" --mpi off --
grep -q '^rank 0 .* bad 0$' "$work/off" || fail "--mpi off: rank 0's cache did not keep the buffer's pages"
grep -q '^rank 1 .* bad 4$' "$work/off" || fail "--mpi off: the pages came back without MPI_Finalize giving them"
[[ $(avail) -eq $want ]] || fail "pool at $(avail) after the runs, not $want"
echo "finalize-trim.sh: ok"

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# HUGEPOOL_POLICY is read once, by the option table, for the core and the
# MPI entry points alike: with the pool short of a 256 MiB request,
# HUGEPOOL_POLICY=Strict (any case) refuses it in malloc (the core) and in
# MPI_Alloc_mem (MPI_ERR_NO_MEM); the preload's default (fallback) and thp
# serve it in both.  (The entry points used to compare the variable with
# "strict" themselves: Strict was strict in the core only.)
#   policy.sh MPIEXEC PROGRAM HUGEPOOL_RUN
set -euo pipefail
mpiexec=$1 prog=$2 run=$3
source "$(dirname "$0")/pool.sh"
pool_take 32 # what MPICH/UCX malloc at 1 MiB and up; not 256 MiB

check() { # policy ('' for unset), expected line
  local policy=$1 want=$2 got
  local -a env=(env -u HUGEPOOL_POLICY)
  [[ -n $policy ]] && env+=("HUGEPOOL_POLICY=$policy")
  got=$("${env[@]}" timeout 120 "$mpiexec" -n 1 "$run" -- "$prog" 2>"$work/err") ||
    fail "HUGEPOOL_POLICY=${policy:-unset}: exit status $?: $(cat "$work/err")"
  [[ $got == "$want" ]] || fail "HUGEPOOL_POLICY=${policy:-unset}: '$got', expected '$want'"
  echo "HUGEPOOL_POLICY=${policy:-unset}: $got"
}
check Strict "core refused 1 mpi refused 1"
check STRICT "core refused 1 mpi refused 1"
check strict "core refused 1 mpi refused 1"
check "" "core refused 0 mpi refused 0"
check Thp "core refused 0 mpi refused 0"
[[ $(avail) -eq 32 ]] || fail "pool at $(avail) after the runs, not 32"
echo "policy.sh: ok"

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# IMB (-DCHECK) and OSU (-c) built with Open MPI (bench/openmpi-suites build),
# on one node: mpirun.openmpi -n 2, plain and under hugepool-run; no CHECK
# defect, every OSU message validated.  Skips (77) without that build
# (HUGEPOOL_OMPI_BENCH_DIR, default /var/tmp/hugepool-ompi-bench).
#   openmpi-suites.sh HUGEPOOL_RUN SOURCE_ROOT
set -euo pipefail
run=$1 root=$2
dir=${HUGEPOOL_OMPI_BENCH_DIR:-/var/tmp/hugepool-ompi-bench}
command -v mpirun.openmpi >/dev/null || { echo "SKIP: Open MPI is not installed" >&2; exit 77; }
[[ -x $dir/imb/IMB-MPI1 && -x $dir/osu/c/mpi/pt2pt/standard/osu_latency ]] ||
  { echo "SKIP: no Open MPI build of IMB and OSU in $dir (bench/openmpi-suites build)" >&2; exit 77; }
source "$(dirname "$0")/pool.sh"
pool_take 60
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1
echo "== plain"
"$root/bench/openmpi-suites" check "$dir" || fail "plain run"
echo "== hugepool-run"
HUGEPOOL_RUN=$run "$root/bench/openmpi-suites" check "$dir" || fail "under hugepool-run"
[[ $(avail) -eq 60 ]] || fail "pool at $(avail) after the runs, not 60"
echo "openmpi-suites.sh: ok"

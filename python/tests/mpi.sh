#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# mpi.sh PYTHON TEST-PY PYTHONPATH: test_mpi.py under Open MPI's mpirun (the
# MPI Debian's python3-mpi4py is built against) with 2 ranks, on a pool of
# exactly 64 free 2 MB pages (the pool lock held, the pool restored).
set -euo pipefail
python=$1 test=$2
export PYTHONPATH=$3
command -v mpirun.openmpi >/dev/null || { echo "SKIP: mpirun.openmpi not installed"; exit 77; }
"$python" -c "import mpi4py" 2>/dev/null || { echo "SKIP: $python has no mpi4py"; exit 77; }
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../tests/mpi/pool.sh"
pool_take 64
# A container: no CMA between ranks, and root is fine.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_rmaps_base_oversubscribe=1
timeout 240 mpirun.openmpi -n 2 "$python" "$test" >"$work/out" 2>&1 && rc=0 || rc=$?
cat "$work/out"
((rc == 0)) || fail "mpirun exited $rc"
# mpirun forwards each rank's lines on its own; two lines can come out joined,
# so look for each rank's words, not for two lines.
for r in 0 1; do grep -q "rank $r: all checks passed" "$work/out" || fail "rank $r did not pass"; done
[[ $(avail) -eq 64 ]] || fail "the pool has $(avail) free pages after the run, not 64"
echo "ok: 2 ranks"

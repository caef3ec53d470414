#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Open MPI's own memory hooks beside hugepool: `mpirun.openmpi -n 2
# hugepool-run -- ./prog` with an unmodified program (openmpi_hooks.c) that
# sends from a malloc'ed 8 MiB buffer, frees it and sends from the next one,
# which lands at the same address with other contents.  With pml ob1 (vader)
# and pml ucx, with hugepool's cache (the freed buffer handed back as it
# was: its pages never left, a registration of them stays true) and without
# it (--cache-slots 0: every free unmaps, the next malloc maps again at the
# same address).  Checks: every byte received right in every round, the
# buffers on 2 MB pages (smaps) in every rank, and under pml ucx, where Open
# MPI's memory patcher and UCX's libucm both install munmap hooks (the ones
# a registration cache invalidates from), that both saw every unmapping
# hugepool made, and none while the cache held the buffer.
#   openmpi-hooks.sh HUGEPOOL_RUN SOURCE_DIR
set -euo pipefail
run=$1 src=$2
command -v mpirun.openmpi >/dev/null && command -v mpicc.openmpi >/dev/null ||
  { echo "SKIP: Open MPI is not installed" >&2; exit 77; }
source "$(dirname "$0")/pool.sh"
np=2 rounds=6 want=40 # 4 pages a buffer, per rank, and what Open MPI and UCX malloc at 1 MiB and up
pool_take "$want"
mpicc.openmpi -O2 -I"$src" -o "$work/prog" "$src/openmpi_hooks.c"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ob1=(--mca pml ob1 --mca btl self,vader)
# pml ucx turns itself down unless told any transport will do (its default
# list names InfiniBand and GPU transports only).
ucx=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any --mca btl self)
go() { # name, pml words..., --, hugepool-run options...
  local name=$1 words=()
  shift
  while [[ $1 != -- ]]; do words+=("$1"); shift; done
  shift
  timeout 120 mpirun.openmpi --oversubscribe "${words[@]}" -n $np "$run" "$@" -- "$work/prog" 8 $rounds \
    >"$work/$name" 2>"$work/$name.err" || fail "$name: exit status $?: $(cat "$work/$name" "$work/$name.err")"
  sed "s/^/$name: /" "$work/$name"
  grep -q 'hugepool.*short' "$work/$name.err" && fail "$name: the pool was short: $(cat "$work/$name.err")"
  [[ $(grep -c "rounds $rounds same_address [0-9]* bad 0$" "$work/$name") -eq $np ]] ||
    fail "$name: a rank received wrong data"
  [[ $(grep -c ' pages 2048$' "$work/$name") -eq $np ]] || fail "$name: buffers not on 2 MB pages"
}
field() { grep -o "$2 -\?[0-9]*" "$work/$1" | awk '{print $2}' | sort -u | tr '\n' ' ' | sed 's/ $//'; }
least() { grep -o "$2 -\?[0-9]*" "$work/$1" | awk '{print $2}' | sort -n | head -n 1; } # over the ranks

go ob1-cached "${ob1[@]}" --
go ob1-trimmed "${ob1[@]}" -- --cache-slots 0
go ucx-cached "${ucx[@]}" --
go ucx-trimmed "${ucx[@]}" -- --cache-slots 0
# The case a stale registration would break: the second buffer at the first
# one's address (cached: the same buffer; trimmed: unmapped, mapped again).
for name in ob1-cached ucx-cached; do
  [[ $(least $name same_address) -eq $((rounds - 1)) ]] || fail "$name: the cache did not hand the buffer back"
done
for name in ob1-trimmed ucx-trimmed; do
  [[ $(least $name same_address) -ge 1 ]] || fail "$name: no buffer mapped again at a freed one's address"
done
# Under pml ucx both hooks are in: they see each of hugepool's unmappings,
# and nothing while the cache keeps the pages.
for name in ucx-cached ucx-trimmed; do
  [[ $(field $name opal_hooks) == 3 ]] || fail "$name: Open MPI's munmap hooks not installed: $(field $name opal_hooks)"
  [[ $(field $name ucm_hooks) == 1 ]] || fail "$name: UCX's munmap hooks not installed"
done
[[ $(field ucx-trimmed unmapped_seen) == "$rounds" ]] ||
  fail "Open MPI's memory hooks missed hugepool's munmap ($(field ucx-trimmed unmapped_seen) of $rounds)"
[[ $(field ucx-trimmed ucm_unmapped_seen) == "$rounds" ]] ||
  fail "UCX's memory hooks missed hugepool's munmap ($(field ucx-trimmed ucm_unmapped_seen) of $rounds)"
[[ $(field ucx-cached unmapped_seen) == 0 ]] || fail "a cached buffer was unmapped"
[[ $(avail) -eq $want ]] || fail "pool at $(avail) after the runs, not $want"
echo "openmpi-hooks.sh: ok"

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Open MPI jobs across the bed's nodes (run by bed.sh): mpirun.openmpi on
# node 0 starts an orted on every other node through on-node (ORTE's rsh
# launcher: --mca plm_rsh_agent "on-node -x", called as ssh would be), with a
# hostfile naming the nodes' addresses; ranks talk over TCP between nodes
# (btl tcp on 192.0.2.0/24, the out-of-band channel too) and shared memory
# (vader) within a node.  The program is cluster_check.c, built here with
# mpicc.openmpi, unmodified, under hugepool-run:
#   openmpi.sh HUGEPOOL_RUN SOURCE_DIR exchange|window|kill|share|suites
# exchange  2 nodes x 2 ranks, buffers malloc'ed every iteration, sent to a
#           rank on the other node and to the next rank: every byte checked,
#           every buffer on 2 MB pages (smaps) in every rank, the bytes
#           between the nodes counted on each node's eth0
# window    --mpi-win-shared, 3 nodes x 2 ranks: one shared communicator per
#           node, each rank reads its node peers' writes, the window on
#           shared hugetlb pages; ranks of a node map the same segments, no
#           segment on two nodes; nothing left on any node, the pool back
# kill      as window, the last rank of the last node killed (SIGKILL) with
#           its window mapped: the job ends, nothing left anywhere
# share     2 ranks on node 0, 1 on node 1: the rank's share of the pool is
#           pool / ranks on its node, from OMPI_COMM_WORLD_LOCAL_SIZE (set by
#           each node's orted): a freed block stays cached only while it fits
# suites    IMB (-DCHECK) and OSU (-c) built with Open MPI, one rank on each of
#           2 nodes, plain and under hugepool-run (skipped without that build)
set -euo pipefail
run=$1 src=$2 mode=$3
command -v mpirun.openmpi >/dev/null && command -v mpicc.openmpi >/dev/null ||
  { echo "SKIP: Open MPI is not installed" >&2; exit 77; }
source "$(dirname "$0")/../mpi/pool.sh"
source "$(dirname "$0")/checks.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset HUGEPOOL_MPI_PRELOAD_LIB
net=192.0.2.0/24
mpirun=("$BED_EXEC" 0 mpirun.openmpi --mca plm_rsh_agent "$BED_EXEC -x" --mca oob_tcp_if_include $net
  --mca pml ob1 --mca btl self,vader,tcp --mca btl_tcp_if_include $net)
job() { # name, slots per node (2,2), np, words after mpirun's options...
  local name=$1 slots=$2 np=$3 i=0 h
  shift 3
  : >"$work/$name.hosts"
  IFS=, read -ra per <<<"$slots"
  for h in $(tr , ' ' <<<"$BED_HOSTS"); do
    ((i < ${#per[@]})) && echo "$h slots=${per[i]}" >>"$work/$name.hosts"
    i=$((i + 1))
  done
  rc=0
  timeout 120 "${mpirun[@]}" --hostfile "$work/$name.hosts" -n "$np" "$@" >"$work/$name" 2>"$work/$name.err" || rc=$?
  cat "$work/$name"
}
ok() { # name, np: exit status 0, and every rank's line says bad 0
  [[ $rc == 0 ]] || fail "$1: exit status $rc: $(cat "$work/$1.err")"
  [[ $(grep -c ' bad 0$' "$work/$1") -eq $2 ]] || fail "$1: not every one of $2 ranks computed the right bytes"
  [[ $(grep -c ' finalize$' "$work/$1") -eq $2 ]] || fail "$1: not every rank finished"
  grep -q 'MPI entry points' "$work/$1.err" && fail "$1: the MPI entry points stood aside: $(cat "$work/$1.err")"
  true
}

build() { prog=$work/cluster-check; mpicc.openmpi -O2 -o "$prog" "$src/cluster_check.c"; }

case $mode in
  exchange)
    pool_take 40
    build
    before=($(rx_bytes 0) $(rx_bytes 1))
    job plain 2,2 4 "$prog" exchange
    ok plain 4
    [[ $(grep -c 'pages 4 4 bad' "$work/plain") -eq 4 ]] || fail "plain run: buffers on hugetlb pages?"
    for i in 0 1; do # as in mpich.sh: 72 MiB to each node
      got=$(($(rx_bytes $i) - ${before[i]}))
      ((got >= 72 << 20)) || fail "node $i received $got bytes on eth0, not the 72 MiB sent to it"
      echo "node $i: $got bytes in over eth0"
    done
    job run 2,2 4 "$run" -- "$prog" exchange
    ok run 4
    [[ $(grep -c 'pages 2048 2048 bad' "$work/run") -eq 4 ]] || fail "hugepool-run: not every rank's buffers on 2 MB pages"
    [[ $(awk '/ exchange / {print $4}' "$work/run" | sort -u | wc -l) -eq 2 ]] || fail "the ranks did not run on 2 nodes"
    [[ $(grep -c 'local [01]/2 exchange' "$work/run") -eq 4 ]] || fail "not 2 ranks to a node"
    sleep 1
    [[ $(left_on_nodes) -eq 0 ]] || fail "processes left on the nodes"
    [[ $(avail) -eq 40 ]] || fail "pool at $(avail) free after the jobs, not 40"
    ;;
  window | kill)
    pool_take 40
    build
    nodes=$BED_NODES np=$((2 * BED_NODES))
    slots=$(printf '2,%.0s' $(seq "$nodes"))
    mnt=$(mktemp -d /tmp/hugepool-bed-mnt.XXXXXX)
    mount -t hugetlbfs -o pagesize=2M none "$mnt"
    trap 'umount -l "$mnt"; rmdir "$mnt"; pool_release; rm -rf "$work"' EXIT
    if [[ $mode == window ]]; then
      job win "${slots%,}" $np "$run" --mpi-win-shared -- "$prog" window
      ok win $np
      check_windows $np $nodes
    else
      job kill "${slots%,}" $np "$run" --mpi-win-shared -- "$prog" kill $((np - 1))
      [[ $rc != 0 && $rc != 124 ]] || fail "the job did not notice the killed rank (exit status $rc)"
      grep -q "rank $((np - 1)) .* window pages 2048" "$work/kill" || fail "the victim did not map its window"
    fi
    check_nothing_left "$mnt"
    ;;
  share)
    pool_take 120
    build
    total=$(cat $pool/nr_hugepages)
    # as in mpich.sh: total/2 - 12 pages fit a rank of 2 and a rank alone,
    # not total/3 (the job's 3 ranks); total/2 + 1 fits the rank alone only
    fits=$((total / 2 - 12)) over=$((total / 2 + 1))
    ((fits * 3 > total)) || fail "pool of $total pages too small for the test"
    # What each rank's environment says of its node: Open MPI's variables,
    # no hydra one (lib/share.c reads MPI_LOCALNRANKS first).
    job env 2,1 3 sh -c 'echo "env $OMPI_COMM_WORLD_RANK ${OMPI_COMM_WORLD_LOCAL_SIZE:-unset} ${MPI_LOCALNRANKS:-unset}"'
    [[ $(grep '^env ' "$work/env" | sort | tr '\n' ' ') == "env 0 2 unset env 1 2 unset env 2 1 unset " ]] ||
      fail "OMPI_COMM_WORLD_LOCAL_SIZE is not 2, 2, 1 on ranks 0, 1, 2: $(cat "$work/env")"
    job fits 2,1 3 "$run" -- "$prog" cache $fits 0 2
    [[ $rc == 0 ]] || fail "fits: exit status $rc: $(cat "$work/fits.err")"
    job over 2,1 3 "$run" -- "$prog" cache $over 0 2
    [[ $rc == 0 ]] || fail "over: exit status $rc: $(cat "$work/over.err")"
    check_shares $fits $over
    ;;
  suites)
    # IMB (-DCHECK) and OSU (-c) built with Open MPI (bench/openmpi-suites),
    # one rank on each of 2 nodes: every message over TCP between them.
    dir=${HUGEPOOL_OMPI_BENCH_DIR:-/var/tmp/hugepool-ompi-bench}
    [[ -x $dir/imb/IMB-MPI1 ]] || { echo "SKIP: no Open MPI build of IMB and OSU in $dir" >&2; exit 77; }
    pool_take 60
    printf '%s slots=1\n' $(cut -d, -f1,2 <<<"$BED_HOSTS" | tr , ' ') >"$work/suites.hosts"
    before=$(rx_bytes 1)
    "$src/../../bench/openmpi-suites" check "$dir" "${mpirun[@]}" --hostfile "$work/suites.hosts" -n 2 ||
      fail "plain run between nodes"
    HUGEPOOL_RUN=$run "$src/../../bench/openmpi-suites" check "$dir" "${mpirun[@]}" --hostfile "$work/suites.hosts" -n 2 ||
      fail "under hugepool-run between nodes"
    echo "node 1: $(($(rx_bytes 1) - before)) bytes in over eth0"
    (($(rx_bytes 1) - before > 64 << 20)) || fail "the benchmarks' messages did not cross eth0"
    sleep 1
    [[ $(left_on_nodes) -eq 0 ]] || fail "processes left on the nodes"
    [[ $(avail) -eq 60 ]] || fail "pool at $(avail) free after the jobs, not 60"
    ;;
  *) fail "mode $mode" ;;
esac
echo "openmpi.sh $mode: ok"

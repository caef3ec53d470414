#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# MPICH (hydra) jobs across the bed's nodes (run by bed.sh), an unmodified
# program (cluster_check.c) under hugepool-run:
#   mpich.sh HUGEPOOL_RUN PROGRAM exchange|window|kill|share|stats [HUGEPOOL]
# exchange  2 nodes x 2 ranks, buffers malloc'ed every iteration and sent to
#           a rank on the other node and to the next rank: every byte checked,
#           every buffer on 2 MB pages (smaps), the bytes between the nodes
#           counted on each node's eth0 (TCP over the veth, not shared memory)
# window    --mpi-win-shared, every node 2 ranks: one shared communicator per
#           node, each rank reads its node peers' writes, the window on shared
#           hugetlb pages; ranks of a node map the same segments, ranks of
#           different nodes none in common; the pool back to where it was
# kill      as window, a rank of the last node killed (SIGKILL) with the
#           window mapped: the job ends, no process left on any node, the
#           pool back, no file left on the hugetlbfs mount
# share     2 ranks on node 0, 1 on node 1: a rank keeps a freed block cached
#           only while it fits the rank's share of the pool, pool / ranks on
#           *its* node (MPI_LOCALNRANKS from hydra's proxy on that node), the
#           kernel's view: Private_Hugetlb of the rank after the free
# stats     the exchange with --stats=json -o DIR/hp.%h.%r, merged by
#           `hugepool stats`: one entry per node with that node's ranks, its
#           peak the sum of its own ranks' peaks, the job's peak the larger
#           node's, not the sum over nodes
set -euo pipefail
run=$1 prog=$2 mode=$3 cli=${4:-}
source "$(dirname "$0")/../mpi/pool.sh"
source "$(dirname "$0")/checks.sh"
mpiexec=($BED_MPIEXEC)
kill_on_nodes() { # every process left in a node's namespace
  while read -r _ _ ns; do
    pids=$(ip netns pids "$ns")
    [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
  done <"$BED_DIR/nodes"
  sleep 1
}
job() { # name, np, mpiexec words...
  local name=$1 np=$2 pid t fin=0
  shift 2
  "${mpiexec[@]}" "$@" >"$work/$name" 2>"$work/$name.err" &
  pid=$!
  rc=0
  # MPICH 4.0.2 over UCX's tcp transport hangs in MPI_Finalize in some runs,
  # with or without hugepool (ranks in ucp_worker_progress closing their
  # endpoints, their peers already in the PMI barrier: tests/README.md).  A
  # job whose every rank reached MPI_Finalize 10 s ago is taken as finished
  # and its processes are killed; one that hangs before that fails the test.
  for ((t = 0; t < 90; t++)); do
    kill -0 $pid 2>/dev/null || break
    if [[ $(grep -c ' finalize$' "$work/$name") -eq $np ]]; then
      ((++fin < 10)) || { rc=hung; break; }
    fi
    sleep 1
  done
  if kill -0 $pid 2>/dev/null; then
    [[ $rc == hung ]] || fail "$name: mpiexec hung before every rank reached MPI_Finalize: $(cat "$work/$name" "$work/$name.err")"
    echo "note: $name: MPI_Finalize over tcp hung; the job's processes are killed"
    kill_on_nodes
    wait $pid || true
    rc=hung
  else
    wait $pid && rc=0 || rc=$?
  fi
  cat "$work/$name"
}
clean_job() { # as job, retried (up to 4 runs) until MPI_Finalize does not hang
  local try
  for try in 1 2 3 4; do
    job "$@"
    [[ $rc == hung ]] || return 0
  done
  fail "$1: MPI_Finalize hung in 4 runs"
}
ok() { # name: exit status 0 (or hung in MPI_Finalize), and every rank's line says bad 0
  [[ $rc == 0 || $rc == hung ]] || fail "$1: exit status $rc: $(cat "$work/$1.err")"
  [[ $(grep -c ' bad 0$' "$work/$1") -eq $2 ]] || fail "$1: not every one of $2 ranks computed the right bytes"
}
hosts2=$(cut -d, -f1,2 <<<"$BED_HOSTS")

case $mode in
  exchange)
    pool_take 40
    before=($(rx_bytes 0) $(rx_bytes 1))
    job plain 4 -hosts "$hosts2" -ppn 2 -n 4 "$prog" exchange
    ok plain 4
    [[ $(grep -c 'pages 4 4 bad' "$work/plain") -eq 4 ]] || fail "plain run: buffers on hugetlb pages?"
    # 3 iterations of 8 MiB from each of the 2 ranks of the other node, 3
    # more from the one rank of it that is next in the ring: 72 MiB
    for i in 0 1; do
      got=$(($(rx_bytes $i) - ${before[i]}))
      ((got >= 72 << 20)) || fail "node $i received $got bytes on eth0, not the 72 MiB sent to it"
      echo "node $i: $got bytes in over eth0"
    done
    job run 4 -hosts "$hosts2" -ppn 2 -n 4 "$run" -- "$prog" exchange
    ok run 4
    [[ $(grep -c 'pages 2048 2048 bad' "$work/run") -eq 4 ]] || fail "hugepool-run: not every rank's buffers on 2 MB pages"
    [[ $(sort -u <<<"$(awk '{print $4}' "$work/run")" | wc -l) -eq 2 ]] || fail "the ranks did not run on 2 nodes"
    ;;
  window | kill)
    pool_take 40
    nodes=$BED_NODES np=$((2 * BED_NODES))
    mnt=$(mktemp -d /tmp/hugepool-bed-mnt.XXXXXX)
    mount -t hugetlbfs -o pagesize=2M none "$mnt"
    trap 'umount -l "$mnt"; rmdir "$mnt"; pool_release; rm -rf "$work"' EXIT
    if [[ $mode == window ]]; then
      job win $np -hosts "$BED_HOSTS" -ppn 2 -n $np "$run" --mpi-win-shared -- "$prog" window
      ok win $np
      check_windows $np $nodes
    else
      job kill -1 -hosts "$BED_HOSTS" -ppn 2 -n $np "$run" --mpi-win-shared -- "$prog" kill $((np - 1))
      [[ $rc != 0 && $rc != hung ]] || fail "the job did not notice the killed rank"
      grep -q "rank $((np - 1)) .* window pages 2048" "$work/kill" || fail "the victim did not map its window"
    fi
    check_nothing_left "$mnt"
    ;;
  share)
    pool_take 120
    total=$(cat $pool/nr_hugepages)
    layout="$(cut -d, -f1 <<<"$BED_HOSTS"):2,$(cut -d, -f2 <<<"$BED_HOSTS"):1"
    # A block of total/2 - 12 pages (room for what MPICH and UCX malloc
    # themselves) fits the share of a rank of 2 (node 0) and that of a rank
    # alone (node 1), not total/3 (the job's 3 ranks); total/2 + 1 fits only
    # the rank alone.
    fits=$((total / 2 - 12)) over=$((total / 2 + 1))
    ((fits * 3 > total)) || fail "pool of $total pages too small for the test"
    job fits 3 -hosts "$layout" -n 3 "$run" -- "$prog" cache $fits 0 2
    [[ $rc == 0 || $rc == hung ]] || fail "fits: exit status $rc: $(cat "$work/fits.err")"
    job over 3 -hosts "$layout" -n 3 "$run" -- "$prog" cache $over 0 2
    [[ $rc == 0 || $rc == hung ]] || fail "over: exit status $rc: $(cat "$work/over.err")"
    check_shares $fits $over
    ;;
  stats)
    pool_take 40
    mkdir "$work/st"
    clean_job stats 4 -hosts "$hosts2" -ppn 2 -n 4 "$run" --stats=json -o "$work/st/hp.%h.%r" -- "$prog" exchange
    ok stats 4
    ls "$work/st"
    [[ $(ls "$work/st" | wc -l) -eq 4 ]] || fail "not one statistics file per rank"
    "$cli" stats --json "$work"/st/hp.* >"$work/merged" || fail "hugepool stats failed"
    "$cli" stats "$work"/st/hp.*
    python3 - "$work/merged" "$work"/st/hp.* <<'PY' || fail "the merged statistics do not add up per node"
import json, sys
rep = json.load(open(sys.argv[1]))
recs = [json.loads(open(f).read()) for f in sys.argv[2:]]
hosts = sorted({r["host"] for r in recs})
assert len(hosts) == 2 and sorted(rep["nodes"]) == hosts, (hosts, list(rep["nodes"]))
peaks = {}
for h in hosts:
    mine = [r for r in recs if r["host"] == h]
    assert sorted(r["local_rank"] for r in mine) == [0, 1], mine
    node = rep["nodes"][h]
    assert sorted(node["ranks"]) == sorted(r["rank"] for r in mine), node
    peaks[h] = sum(-(-r["bytes_mapped_peak"] // r["page_size"]) for r in mine)
    assert node["pool_pages_at_peak"] == peaks[h] > 0, (node, peaks[h])
assert rep["pool_pages_at_peak"] == max(peaks.values()), rep["pool_pages_at_peak"]
assert rep["pool_pages_at_peak_all_nodes"] == sum(peaks.values())
print("per node:", peaks, "job:", rep["pool_pages_at_peak"])
PY
    ;;
  *) fail "mode $mode" ;;
esac
echo "mpich.sh $mode: ok"

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# IMB and OSU between the bed's nodes (run by bed.sh -n 2), MPICH (hydra),
# 2 nodes x 2 ranks: TCP between the nodes, shared memory within one.
#   benchmarks.sh HUGEPOOL_RUN
# The benchmarks come from their public sources, built by the site (they are
# not packaged in Debian): IMB_MPI1 names an IMB-MPI1 built with
# CPPFLAGS=-DCHECK (data checks), OSU_MPI_DIR the c/mpi folder of an OSU 7.x
# build (osu_latency, osu_mbw_mr, osu_allreduce; -c validates the data).
# Without them the test is skipped (77).  Each benchmark runs twice, plain and
# under hugepool-run: no error, no data defect in either, and while it runs
# the kernel's view of every rank (its /proc/PID/smaps, read from outside,
# every 0.1 s): under hugepool-run each rank of each node holds its buffers on
# 2 MB pages (Private_Hugetlb at least two buffers of the largest size),
# plainly none.
set -euo pipefail
run=$1
skip() { echo "SKIP: $*" >&2; exit 77; }
imb=${IMB_MPI1:-} osu=${OSU_MPI_DIR:-}
[[ -x $imb ]] || skip "IMB_MPI1 does not name an IMB-MPI1 built with -DCHECK"
[[ -x $osu/pt2pt/standard/osu_latency && -x $osu/pt2pt/standard/osu_mbw_mr && -x $osu/collective/blocking/osu_allreduce ]] ||
  skip "OSU_MPI_DIR does not name the c/mpi folder of an OSU build"
source "$(dirname "$0")/../mpi/pool.sh"
pool_take 160
a=$(cut -d, -f1 <<<"$BED_HOSTS") b=$(cut -d, -f2 <<<"$BED_HOSTS")
big=$((4 << 20)) # the largest message
# 2 ranks a node; -ppn 1 over two hosts places ranks 0 and 2 on node 0 and 1
# and 3 on node 1: IMB's PingPong (ranks 0 and 1) crosses the veth, its
# Allreduce has two ranks on each node.
across=(-hosts "$a,$b" -ppn 1 -n 4)
blocks=(-hosts "$a,$b" -ppn 2 -n 4) # ranks 0,1 | 2,3: osu_mbw_mr pairs 0-2, 1-3
pair=(-hosts "$a,$b" -ppn 1 -n 2)

sampler() { # out-file comm-prefix: max Private_Hugetlb (kB) per rank, with its node
  local out=$1 comm=$2
  declare -A peak=() where=()
  while [[ ! -e $work/stop ]]; do
    while read -r _ idx ns; do
      for pid in $(ip netns pids "$ns" 2>/dev/null); do
        [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$comm"* ]] || continue
        kb=$(awk '/^Private_Hugetlb:/ {s += $2} END {print s + 0}' "/proc/$pid/smaps" 2>/dev/null || echo 0)
        ((kb >= ${peak[$pid]:-0})) && peak[$pid]=$kb
        where[$pid]=$idx
      done
    done <"$BED_DIR/nodes"
    sleep 0.1
  done
  for pid in "${!peak[@]}"; do echo "node ${where[$pid]} pid $pid private_hugetlb_kb ${peak[$pid]}"; done >"$out"
}
mpiexec=($BED_MPIEXEC)
kill_on_nodes() {
  while read -r _ _ ns; do
    pids=$(ip netns pids "$ns")
    [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
  done <"$BED_DIR/nodes"
  sleep 1
}
job() { # name done-regex mpiexec-words...: sets rc (a status, or hung)
  # MPICH 4.0.2 over UCX's tcp transport can hang in MPI_Finalize
  # (tests/README.md): a job that printed its last line (done-regex) 5 s ago
  # is taken as finished and its processes killed; one that hangs before
  # that, or runs past 120 s, fails the test.
  local name=$1 done=$2 pid t fin=0
  shift 2
  "${mpiexec[@]}" "$@" >"$work/$name" 2>"$work/$name.err" &
  pid=$!
  rc=0
  for ((t = 0; t < 120; t++)); do
    kill -0 $pid 2>/dev/null || break
    if grep -qsE "$done" "$work/$name"; then ((++fin < 5)) || { rc=hung; break; }; fi
    sleep 1
  done
  if kill -0 $pid 2>/dev/null; then
    [[ $rc == hung ]] || fail "$name: hung before its last line: $(tail -n 5 "$work/$name" "$work/$name.err")"
    echo "note: $name: MPI_Finalize over tcp hung; the job's processes are killed"
    kill_on_nodes
    wait $pid || true
  else
    wait $pid && rc=0 || rc=$?
  fi
}
bench() { # name np comm done-regex layout-array prog args...: plain, then under hugepool-run
  local name=$1 np=$2 comm=$3 done=$4 mode need spid
  local -n lay=$5
  shift 5
  for mode in plain run; do
    rm -f "$work/stop"
    sampler "$work/$name.$mode.smaps" "$comm" &
    spid=$!
    if [[ $mode == plain ]]; then
      job "$name.$mode" "$done" "${lay[@]}" "$@"
    else
      job "$name.$mode" "$done" "${lay[@]}" "$run" -- "$@"
    fi
    touch "$work/stop"
    wait $spid
    [[ $rc == 0 || $rc == hung ]] || fail "$name ($mode): exit status $rc: $(tail -n 20 "$work/$name.$mode.err")"
    ! grep -qiE 'error|fail' "$work/$name.$mode" "$work/$name.$mode.err" ||
      fail "$name ($mode): $(grep -iE 'error|fail' "$work/$name.$mode" "$work/$name.$mode.err" | head -n 5)"
    echo "$name ($mode): $rc, ${SECONDS}s into the test"
    cat "$work/$name.$mode.smaps"
    [[ $(awk '{print $2}' "$work/$name.$mode.smaps" | sort -u | tr '\n' ' ') == "0 1 " ]] ||
      fail "$name ($mode): the ranks were not seen on both nodes"
    [[ $(wc -l <"$work/$name.$mode.smaps") -eq $np ]] || fail "$name ($mode): not $np ranks seen"
    need=$((2 * big >> 10))
    if [[ $mode == run ]]; then
      awk -v n="$need" '$6 < n {bad = 1} END {exit bad}' "$work/$name.$mode.smaps" ||
        fail "$name (hugepool-run): a rank's buffers were not on 2 MB pages (Private_Hugetlb below $need kB)"
    else
      awk '$6 > 0 {bad = 1} END {exit bad}' "$work/$name.$mode.smaps" ||
        fail "$name (plain): a rank had private hugetlb pages without hugepool"
    fi
  done
}
# IMB's CHECK build: the last column of every result line counts defects.
imb_defects() { awk '/^ +[0-9]+ +[0-9]+ / && $NF != "0.00" {print}' "$1"; }
IMB_ARGS="PingPong Allreduce -msglog 20:22 -iter 10 -iter_policy off -time 600 -npmin 4"
bench imb 4 IMB-MPI1 "All processes entering MPI_Finalize" across "$imb" $IMB_ARGS
for m in plain run; do
  [[ $(grep -c '^# Benchmarking ' "$work/imb.$m") -eq 2 ]] || fail "imb ($m): not 2 benchmarks run"
  [[ -z $(imb_defects "$work/imb.$m") ]] || fail "imb ($m): data defects: $(imb_defects "$work/imb.$m")"
  [[ $(grep -cE "^ +4194304 +10 " "$work/imb.$m") -eq 2 ]] || fail "imb ($m): not every benchmark reached 4 MiB"
done
OSU_ARGS="-c -m 1048576:$big -i 10 -x 2"
osu_check() { # name: every size validated, none failed
  ! grep -q 'Fail' "$work/$1.$2" || fail "$1 ($2): validation failed: $(grep Fail "$work/$1.$2")"
  [[ $(grep -cE "^$big +.*Pass" "$work/$1.$2") -eq 1 ]] || fail "$1 ($2): no validated line at $big bytes"
}
bench osu_latency 2 osu_latency "^$big " pair "$osu/pt2pt/standard/osu_latency" $OSU_ARGS
bench osu_mbw_mr 4 osu_mbw_mr "^$big " blocks "$osu/pt2pt/standard/osu_mbw_mr" $OSU_ARGS -W 4
bench osu_allreduce 4 osu_allreduce "^$big " across "$osu/collective/blocking/osu_allreduce" $OSU_ARGS
for n in osu_latency osu_mbw_mr osu_allreduce; do for m in plain run; do osu_check $n $m; done; done
echo "benchmarks.sh: ok"

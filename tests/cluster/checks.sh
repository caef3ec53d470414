# SPDX-License-Identifier: BSD-3-Clause
# Sourced by mpich.sh and openmpi.sh (inside bed.sh): what the bed's nodes
# show after a job, the same whichever MPI launched it.  Uses $BED_DIR,
# $work and, from tests/mpi/pool.sh, fail and avail.
left_on_nodes() { # processes left in any node's namespace
  local n=0
  while read -r _ _ ns; do n=$((n + $(ip netns pids "$ns" | wc -l))); done <"$BED_DIR/nodes"
  echo $n
}
rx_bytes() { # node index: bytes received on its eth0
  ip -n "$(awk -v i="$1" '$2 == i {print $3}' "$BED_DIR/nodes")" -s link show eth0 | awk 'NR == 4 {print $1}'
}
check_windows() { # np nodes: $work/win of the window job, 2 ranks to a node
  local np=$1 nodes=$2 sets inodes
  [[ $(grep -c 'local [01]/2 window pages 2048 shared_hugetlb 10240 ' "$work/win") -eq $np ]] ||
    fail "not every rank's window on shared 2 MB pages, 2 ranks to a node"
  # one set of segments per node, the same in each rank of that node, none in two nodes
  sets=$(awk '/ window / {print $4, $13}' "$work/win" | sort -u)
  [[ $(wc -l <<<"$sets") -eq $nodes ]] || fail "ranks of one node map different segments: $sets"
  [[ $(cut -d' ' -f1 <<<"$sets" | sort -u | wc -l) -eq $nodes ]] || fail "a node's ranks see two segment sets"
  inodes=$(cut -d' ' -f2 <<<"$sets" | tr , '\n')
  [[ $(sort <<<"$inodes" | uniq -d) == "" ]] || fail "a segment mapped on two nodes: $sets"
  echo "segments per node: $sets"
}
check_nothing_left() { # hugetlbfs mount: no process, pool page (40 free) or file left
  local mnt=$1
  sleep 1
  [[ $(left_on_nodes) -eq 0 ]] || fail "processes left on the nodes"
  [[ $(avail) -eq 40 ]] || fail "pool at $(avail) free after the job, not 40"
  [[ -z $(ls -A "$mnt") ]] || fail "files left on the hugetlbfs mount: $(ls -A "$mnt")"
}
check_shares() { # fits over: $work/fits and $work/over of 3 ranks, 2 on node 0, 1 on node 1
  local fits=$1 over=$2
  grep -q "^rank 0 .* local 0/2 cache chosen 1 kept_kb $((fits * 2048))\$" "$work/fits" ||
    fail "a rank of node 0 (2 ranks) did not keep $fits pages, half the pool less one"
  grep -q "^rank 2 .* local 0/1 cache chosen 1 kept_kb $((fits * 2048))\$" "$work/fits" ||
    fail "the rank alone on node 1 did not keep $fits pages"
  grep -q "^rank 0 .* local 0/2 cache chosen 1 kept_kb 0\$" "$work/over" ||
    fail "a rank of node 0 (2 ranks) kept $over pages, more than half the pool"
  grep -q "^rank 2 .* local 0/1 cache chosen 1 kept_kb $((over * 2048))\$" "$work/over" ||
    fail "the rank alone on node 1 did not keep $over pages"
}

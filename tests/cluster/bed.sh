#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The multi-node test bed: N simulated nodes on this host, each a network and
# a UTS namespace of its own (its own host name, its own eth0 with an address
# from the documentation range 192.0.2.0/24), joined by a bridge that lives in
# a further network namespace (the switch), so that nothing appears in the
# host's own namespaces: no interface, no address, no route.  Runs one test
# script inside the bed and removes everything it created when it ends, also
# when the test fails or is interrupted.
#   bed.sh [-n NODES] TEST-SCRIPT ARGS...
# The test script runs in the host's namespaces with these variables:
#   BED_DIR     the bed's directory (UTS namespace files, hostfile, logs)
#   BED_NODES   the node count
#   BED_HOSTS   the nodes' addresses, comma-separated (a hydra -hosts list)
#   BED_EXEC    tests/cluster/on-node: `on-node ADDRESS|INDEX COMMAND...` runs a
#               command on a node; it is also hydra's -launcher-exec
#   BED_MPIEXEC an mpiexec command line (as words in a string) that starts on node 0
#               and places ranks on the nodes through on-node
# Exit status: the test's; 77 (skip) when the bed cannot be made here.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
nodes=3
if [[ ${1:-} == -n ]]; then nodes=$2; shift 2; fi
(($# >= 1)) || { echo "usage: bed.sh [-n NODES] TEST-SCRIPT ARGS..." >&2; exit 2; }
((nodes >= 2 && nodes <= 16)) || { echo "bed.sh: 2 to 16 nodes" >&2; exit 2; }

tag=hpbed$$ # unique on this host while this script runs
switch=$tag-sw
dir=/run/$tag
made_dir=0
made_ns=()

teardown() {
  local rc=$?
  trap - EXIT ERR
  trap "" INT TERM # a second signal (timeout forwards one) must not cut the clean-up short
  set +e
  # Every process still in a node (a hung rank, a proxy) is killed first, by
  # the namespace it is in, so that nothing keeps a namespace alive.
  for ns in "${made_ns[@]}"; do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [[ -n $pids ]] && kill -KILL $pids 2>/dev/null
  done
  for ns in "${made_ns[@]}"; do ip netns delete "$ns" 2>/dev/null; done
  if ((made_dir)); then
    for f in "$dir"/uts* "$dir"/ipc*; do [[ -e $f ]] && umount "$f" 2>/dev/null; done
    rm -rf "$dir"
  fi
  exit "$rc"
}
trap teardown EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

skip() { echo "SKIP: $*" >&2; exit 77; }
((EUID == 0)) || skip "the bed needs root (network namespaces)"
command -v ip >/dev/null && command -v unshare >/dev/null && command -v nsenter >/dev/null ||
  skip "ip, unshare and nsenter are needed"

mkdir -m 700 "$dir"
made_dir=1
ip netns add "$switch" || skip "cannot create a network namespace"
made_ns+=("$switch")
ip -n "$switch" link add br0 type bridge
ip -n "$switch" link set br0 up
hosts=()
for ((i = 0; i < nodes; i++)); do
  ns=$tag-n$i addr=192.0.2.$((10 + i))
  ip netns add "$ns"
  made_ns+=("$ns")
  # The pair is made inside the switch with its other end put straight into
  # the node: it never exists in the host's namespace.
  ip -n "$switch" link add p$i type veth peer name eth0 netns "$ns"
  ip -n "$switch" link set p$i master br0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
  # A UTS namespace kept by a bind mount on a file of the bed's directory:
  # the node's own host name for every command run on it.
  touch "$dir/uts$i" "$dir/ipc$i"
  unshare --uts="$dir/uts$i" --ipc="$dir/ipc$i" hostname "$tag-n$i"
  echo "$addr $i $ns" >>"$dir/nodes"
  hosts+=("$addr")
done
# Each node reaches every other before the test starts (a TCP connect to a
# port nobody listens on is refused by a reachable node; no ping needed).
reach='import socket,sys
s=socket.socket(); s.settimeout(5)
try: s.connect((sys.argv[1], 9))
except ConnectionRefusedError: sys.exit(0)
except OSError: sys.exit(1)'
for ((i = 0; i < nodes; i++)); do
  for ((j = 0; j < nodes; j++)); do
    ((i == j)) && continue
    ip netns exec "$tag-n$i" python3 -c "$reach" "192.0.2.$((10 + j))" ||
      { echo "bed.sh: node $i cannot reach node $j" >&2; exit 1; }
  done
done

export BED_DIR=$dir BED_NODES=$nodes BED_EXEC=$here/on-node
BED_HOSTS=$(IFS=,; echo "${hosts[*]}")
export BED_HOSTS
# Hydra: ranks placed by the launcher wrapper; proxies call back to node 0's
# address (-iface), which resolves on every node (host names do not).
export BED_MPIEXEC="$BED_EXEC 0 mpiexec -launcher ssh -launcher-exec $BED_EXEC -iface eth0"
echo "bed: $nodes nodes ($BED_HOSTS) on bridge $switch"
"$@"

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The UCX variables the MPI tests and benchmarks set, checked against the
# MPI they run on: Debian's MPICH is ch4:ucx (mpichversion), UCX knows
# UCX_SYSV_HUGETLB_MODE and UCX_POSIX_HUGETLB_MODE (ucx_info -c, from
# ucx-utils) and reads them, and with room in the pool UCX maps hugetlb
# pages in every rank unless UCX_SYSV_HUGETLB_MODE=n (each rank's smaps):
# without it the pool counts of the MPI tests would include UCX's pages.
#   ucx-variables.sh MPIEXEC PROGRAM
set -euo pipefail
mpiexec=$1 prog=$2
pool=/sys/kernel/mm/hugepages/hugepages-2048kB
fail() { echo "FAIL: $*" >&2; exit 1; }
avail() { echo $(($(cat $pool/free_hugepages) - $(cat $pool/resv_hugepages))); }

device=$(mpichversion 2>/dev/null | sed -n 's/^MPICH Device:[[:space:]]*//p')
[[ $device == ch4:ucx ]] || { echo "skip: MPICH device is '$device', not ch4:ucx"; exit 77; }
echo "MPICH device: $device"
command -v ucx_info >/dev/null || fail "ucx_info not found (Debian package ucx-utils, in .ci/deps)"
config=$(ucx_info -c) # whole, before grep: grep -q would stop ucx_info with SIGPIPE
for var in UCX_SYSV_HUGETLB_MODE UCX_POSIX_HUGETLB_MODE; do
  default=$(sed -n "s/^$var=//p" <<<"$config")
  [[ -n $default ]] || fail "ucx_info -c does not list $var"
  set_to_n=$(env "$var=n" ucx_info -c)
  [[ $(sed -n "s/^$var=//p" <<<"$set_to_n") == n ]] || fail "UCX does not read $var=n"
  echo "ucx_info -c: $var=$default by default, n when set"
done

source "$(dirname "$0")/../pool/pool-lock.sh"
work=$(mktemp -d)
trap 'pool_release; rm -rf "$work"' EXIT
pool_hold 16
unset UCX_SYSV_HUGETLB_MODE UCX_POSIX_HUGETLB_MODE UCX_MM_HUGETLB_MODE
go() { # name, env words...
  local name=$1
  shift
  timeout 120 env "$@" "$mpiexec" -n 2 "$prog" >"$work/$name" 2>&1 || fail "$name: $(cat "$work/$name")"
  echo "$name: $(tr '\n' ' ' <"$work/$name")"
}
go default
go sysv_off UCX_SYSV_HUGETLB_MODE=n
go posix_off UCX_POSIX_HUGETLB_MODE=n
[[ $(grep -c 'hugetlb_kb [1-9]' "$work/default") -eq 2 ]] ||
  fail "UCX mapped no hugetlb pages by default: the check below would prove nothing"
[[ $(grep -c 'hugetlb_kb 0$' "$work/sysv_off") -eq 2 ]] || fail "UCX_SYSV_HUGETLB_MODE=n left UCX's hugetlb pages"
# UCX's posix transport takes no hugetlb pages here (its files are on
# /dev/shm, tmpfs): the variable changes nothing, and is set for
# configurations where it would.
[[ $(grep -c 'hugetlb_kb [1-9]' "$work/posix_off") -eq 2 ]] ||
  fail "UCX_POSIX_HUGETLB_MODE=n alone removed UCX's hugetlb pages: update mpi/README.md"
[[ $(avail) -eq 16 ]] || fail "pool at $(avail) after the runs, not 16"
echo "ucx-variables.sh: ok"

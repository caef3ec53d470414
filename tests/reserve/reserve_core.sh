#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The helper's core paths run straight from the build tree as root (no setgid
# install), so the ASan/UBSan and TSan configurations check them too: grant,
# per-node grant, status, refused and partial releases, shortfall, 16
# concurrent callers, an intent settled.  (Root skips the group check; every limit still applies.)
source "$(dirname "$0")/lib.sh"
fake_setup
H=$RESERVE_BIN_DIR/hugepool-reserve-fake
run() {
  set +e
  OUT=$("$H" "$@" 2>&1)
  RC=$?
  set -e
}
set_pool 4 4
run 10
expect_eq "$RC/$(nr)" "0/14" "grant"
run 6 --node 1
expect_eq "$RC/$(cat "$(fake_node 1 nr_hugepages)")" "0/6" "node grant"
run 1 --size 1G
expect_eq "$RC/$(cat "$(fake_pool nr_hugepages 1048576)")" "0/1" "1 GB grant"
run --status
grep -q '10 pages of 2048 kB on node any' <<<"$OUT" || fail "status: $OUT"
echo 9 >"$(fake_pool free_hugepages)" # 11 of the 20 in use: node 1's 6 are still free
run --release
expect_eq "$RC/$(nr)/$(cat "$(fake_node 1 nr_hugepages)")" "1/14/0" "release: one pool kept (in use), the others given back"
echo 14 >"$(fake_pool free_hugepages)"
run --release
expect_eq "$RC/$(nr)" "0/4" "release of the rest"
echo 20 >"$(fake_pool capacity)"
run 50
expect_eq "$RC/$(nr)" "1/4" "shortfall restored"
rm -f "$(fake_pool capacity)"
run 01
expect_eq "$RC" 2 "usage error"
pids=()
for i in $(seq 1 16); do
  "$H" $((i * 3)) >/dev/null 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent caller failed"; done
expect_eq "$(nr)" $((4 + 48)) "16 concurrent callers"
run --release
expect_eq "$RC/$(nr)" "0/4" "all given back"
# An intent left by a helper killed mid-grant: settled by the next call.
echo 9 >"$(fake_pool nr_hugepages)"
echo 9 >"$(fake_pool free_hugepages)"
printf '# hugepool-reserve grants: uid node size_kB pages\nintent 4242 any 2048 4 5 5\n' | seal \
  >"$FAKE/var/lib/hugepool/grants"
run --status
grep -q '^  none' <<<"$OUT" || fail "status: $OUT"
run --release
expect_eq "$RC/$(grep -c '^4242 any 2048 5$' "$FAKE/var/lib/hugepool/grants")" "0/1" "an intent is charged by the next call"

# What another user's processes map counts each page once (usage.c), read
# from their smaps: user 4242 (grant 6) maps file 777 in two processes at
# overlapping offsets (2 pages, each process sees both), file 778 once
# (1 page), and a private mapping with 1 page of its own and 1 a fork shares
# (not counted): 4 pages, so 2 stay promised.  The kernel's HugetlbPages
# adds up to 12.  With 5 pages free root's release of 4 must be refused
# (5 - 2 < 4), with 6 it goes through: the count is exactly 4.
rm -rf "$FAKE"/proc/[0-9]*
fake_proc 6001 4242 12288
fake_proc 6002 4242 4096
long=$(printf 'x%.0s' $(seq 300)) # a path longer than the line buffer
cat >"$FAKE/proc/6001/smaps" <<SMAPS
7f0000000000-7f0000800000 rw-s 00000000 00:10 777                        /memfd:seg (deleted)
Size:               8192 kB
KernelPageSize:     2048 kB
Shared_Hugetlb:     4096 kB
Private_Hugetlb:       0 kB
VmFlags: rd wr sh mr mw me ms de ht sd
7f0000800000-7f0000c00000 rw-p 00000000 00:10 4321                       /anon_hugepage (deleted)
Shared_Hugetlb:     2048 kB
Private_Hugetlb:    2048 kB
7f0000c00000-7f0000e00000 rw-s 00000000 00:10 778                        /$long
Shared_Hugetlb:        0 kB
Private_Hugetlb:    2048 kB
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
SMAPS
cat >"$FAKE/proc/6002/smaps" <<SMAPS
7e0000000000-7e0000400000 rw-s 00200000 00:10 777                        /memfd:seg (deleted)
Shared_Hugetlb:     4096 kB
Private_Hugetlb:       0 kB
SMAPS
for free in 5 6; do
  printf '0 any 2048 4\n4242 any 2048 6\n' | seal >"$FAKE/var/lib/hugepool/grants"
  echo 10 >"$(fake_pool nr_hugepages)"
  echo "$free" >"$(fake_pool free_hugepages)"
  run --release
  expect_eq "$RC/$(nr)" "$([[ $free == 5 ]] && echo 1/10 || echo 0/6)" \
    "$free pages free: user 4242's shared and private pages count once (4 of its 6 mapped, 2 promised)"
done
rm -rf "$FAKE"/proc/[0-9]*

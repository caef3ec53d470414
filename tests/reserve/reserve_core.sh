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

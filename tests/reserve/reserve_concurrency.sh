#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# 16 concurrent callers (as with mpiexec -n 16 hugepool-reserve N): the result
# is the same whatever the interleaving, never last-writer-wins.
source "$(dirname "$0")/lib.sh"
fake_setup
write_conf <<CONF
max_pages 100000
max_fraction 1
min_free_mb 0
group nogroup
CONF

# Same user, 16 ranks asking 10, 20, ..., 160: the user holds 160, pool +160.
set_pool 5 5
pids=()
for i in $(seq 1 16); do
  setpriv --reuid=65534 --regid=65534 --clear-groups "$HELPER" $((i * 10)) >"$INST/out.$i" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent caller failed: $(cat "$INST"/out.*)"; done
expect_eq "$(nr)" 165 "16 ranks of one user: pool grew by the largest request"
expect_eq "$(grep -c . "$FAKE/var/lib/hugepool/grants")" 3 "grant table: header, one grant, end"
grep -qx '65534 any 2048 160' "$FAKE/var/lib/hugepool/grants" || fail "grant table: $(cat "$FAKE/var/lib/hugepool/grants")"
pass "one grant of 160 recorded"

# 16 different users at once, 7 pages each: +112, each holds 7.
pids=()
for i in $(seq 1 16); do
  setpriv --reuid=$((20000 + i)) --regid=65534 --clear-groups "$HELPER" 7 >"$INST/out.$i" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent user failed: $(cat "$INST"/out.*)"; done
expect_eq "$(nr)" 277 "16 users: pool grew by 16 x 7"
expect_eq "$(grep -c ' any 2048 7$' "$FAKE/var/lib/hugepool/grants")" 16 "16 grants of 7 recorded"

# All release at once (and nobody's ranks too): back to the starting 5.
pids=()
for i in $(seq 1 16); do
  setpriv --reuid=$((20000 + i)) --regid=65534 --clear-groups "$HELPER" --release >"$INST/out.$i" 2>&1 &
  pids+=($!)
  setpriv --reuid=65534 --regid=65534 --clear-groups "$HELPER" --release >"$INST/outn.$i" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a concurrent release failed"; done
expect_eq "$(nr)" 5 "32 concurrent releases: pool back to its size before"
expect_eq "$(head -n 1 "$FAKE/var/lib/hugepool/grants")" '# hugepool-reserve grants: uid node size_kB pages' "table header"
grep -Eq '^end [0-9a-f]{16}$' <(sed -n 2p "$FAKE/var/lib/hugepool/grants") && [[ $(wc -l <"$FAKE/var/lib/hugepool/grants") == 2 ]] ||
  fail "grants left: $(cat "$FAKE/var/lib/hugepool/grants")"
pass "no grants left"

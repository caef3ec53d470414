#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Time spent waiting for the pool lock is not a test's own (pool-lock limit,
# cmake/pool-tests.cmake), and a test that must give up says why:
#  1. a Catch2 test (kv::PoolGuard) and a with-pool test whose lock another
#     process holds for longer than the test's own limit still pass, and
#     say that they waited, for whom (pid and command line) and how long;
#  2. a test that hangs once it has the lock is stopped at its own limit,
#     and the pool it set is restored;
#  3. a test that waits past its wait limit is stopped and names the holder;
#  4. a test that takes the lock inside a process that holds it fails at
#     once instead of waiting for itself.
#   lock-wait.sh POOL-LOCK CORE-TESTS   (root; the holder here is flock(1))
set -euo pipefail
tool=$1 core=$2
with_pool=$(dirname "$0")/../preload/with-pool
lock=/tmp/hugepool-pool.lock
nr=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
work=$(mktemp -d)
holder=
trap '[[ -z $holder ]] || kill "$holder" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

hold_for() { # seconds: another process holds the lock that long from when it has it
  rm -f "$work/held"
  flock -x "$lock" -c "touch '$work/held'; sleep $1" &
  holder=$! holder_pid=$!
  while [[ ! -e $work/held ]]; do sleep 0.1; done
}
release_holder() {
  wait "$holder" 2>/dev/null || true
  holder=
}
limited() { # name limit wait command...: the command under pool-lock limit
  local name=$1 limit=$2 wait=$3
  shift 3
  local start=$SECONDS
  rc=0
  "$tool" limit "$limit" --wait "$wait" -- "$@" >"$work/$name.out" 2>&1 || rc=$?
  took=$((SECONDS - start))
  out=$(cat "$work/$name.out")
}
says() { # what text
  grep -qF -- "$2" <<<"$out" || fail "$1: the output lacks '$2': $out"
}

# 1. Waited longer than the limit, and passed.
test_case="a cache hit returns the same mapping and takes no new page or fault"
hold_for 8
limited guard 4 60 "$core" "$test_case"
release_holder
((rc == 0)) || fail "PoolGuard: a test that waited for the lock failed (exit $rc): $out"
says PoolGuard "waiting for the pool lock held by pid $holder_pid"
says PoolGuard "pool-lock: the test waited"
((took > 4)) || fail "PoolGuard: the holder held the lock for 8 s, the test ended after ${took} s"
pass "PoolGuard: waited ${took} s in all for flock(1), its own limit 4 s: passed, and said so"
echo "$out" | grep -E 'pool-lock: (waiting|got|the test)' | sed 's/^/    /'

hold_for 8
limited with-pool 4 60 "$with_pool" 3 sh -c "echo free \$((\$(cat ${nr%/*}/free_hugepages) - \$(cat ${nr%/*}/resv_hugepages)))"
((rc == 0)) || fail "with-pool: a test that waited for the lock failed (exit $rc): $out"
says with-pool "waiting for the pool lock held by pid $holder_pid (flock -x $lock -c"
says with-pool "pool-lock: the test waited"
says with-pool "free 3"
release_holder
pass "with-pool: waited for flock(1) past its own limit of 4 s, passed, said so"

# 2. A hang once the lock is held: stopped at the limit, the pool restored.
before=$("$tool" run -- cat "$nr")
limited hang 2 60 "$tool" run --free 5 -- sleep 60
((rc == 124)) || fail "hang: exit $rc, expected 124 (stopped at its limit): $out"
says hang "stopped the test: it ran past its own limit of 2 s"
((took < 30)) || fail "hang: stopped after ${took} s"
after=$("$tool" run -- cat "$nr")
[[ $after == "$before" ]] || fail "hang: pool left at $after pages, was $before"
pass "a hang after the lock was taken: stopped after ${took} s (limit 2 s), pool back at $after pages"

# 3. Waited past the wait limit: stopped, the holder named.
hold_for 10
limited budget 60 2 "$with_pool" 0 true
((rc == 1)) || fail "wait limit: exit $rc, expected 1: $out"
says budget "gave up: the test waited"
says budget "for the pool lock, held by pid $holder_pid (flock -x $lock"
release_holder
pass "a wait past the wait limit (2 s): stopped, the holder named"

# 4. Taking the lock inside its own holder: fails at once.
limited nested 30 60 "$with_pool" 0 "$with_pool" 0 true
((rc != 0)) || fail "nested: passed: $out"
says nested "the pool lock is held by this process's own ancestor"
((took < 20)) || fail "nested: took ${took} s to fail"
pass "a nested take fails at once (${took} s) and says why"

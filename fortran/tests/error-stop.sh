#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# hugepool_allocate without stat= on a short pool: ERROR STOP with
# hugepool's reason on stderr and a non-zero exit; never a signal.
#   error-stop.sh PROGRAM   (under with-pool)
set -uo pipefail
out=$("$1" stop 2>&1); rc=$?
echo "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }
((rc != 0 && rc < 128)) || fail "exit status $rc (0 or a signal)"
grep -q "FAIL: the allocation returned" <<<"$out" && fail "hugepool_allocate returned without stat="
grep -q "ERROR STOP hugepool: cannot allocate 2147483648 bytes on 2 MB pages" <<<"$out" || fail "no ERROR STOP with the reason"
echo "ok: ERROR STOP with the reason, exit $rc"

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A HUGEPOOL_* variable whose name is no option (a misspelling) is not
# silently ignored: the library says so once, naming the option it
# resembles, and the program runs with the defaults.  Valid names say nothing.
#   unknown-option.sh PROBE   (tests/core/probe.c, linked with libhugepool.so)
set -uo pipefail
probe=$1
fails=0
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
clean=(env -u LD_PRELOAD)
for v in $(env | grep -o '^HUGEPOOL_[A-Z0-9_]*'); do clean+=(-u "$v"); done

# No allocation (count 0): the options are read when the library loads.
err=$("${clean[@]}" HUGEPOOL_POLCY=thp "$probe" 0 0 2>&1 >/tmp/unknown-option.$$) && rc=0 || rc=$?
out=$(cat /tmp/unknown-option.$$)
rm -f /tmp/unknown-option.$$
[[ $rc == 0 ]] && pass "the program runs" || fail "exit $rc: $err"
[[ $(grep -c 'HUGEPOOL_POLCY is not a hugepool option (did you mean HUGEPOOL_POLICY?)' <<<"$err") == 1 ]] &&
  pass "one warning names the misspelt variable and the option it resembles" || fail "stderr: $err"
grep -q '^policy strict' <<<"$out" && pass "the default policy applies" || fail "stdout: $out"
err=$("${clean[@]}" HUGEPOOL_SHINY=1 "$probe" 0 0 2>&1 >/dev/null)
grep -q 'HUGEPOOL_SHINY is not a hugepool option; it is ignored' <<<"$err" &&
  pass "a name like no option: a plain warning" || fail "stderr: $err"
err=$("${clean[@]}" HUGEPOOL_POLICY=thp HUGEPOOL_CACHE_SLOTS=8 "$probe" 0 0 2>&1 >/dev/null)
[[ -z $err ]] && pass "valid names: nothing on stderr" || fail "stderr: $err"
# Set for hugepool by Spack's modules and for CMake's find_package: no mistake.
err=$("${clean[@]}" HUGEPOOL_ROOT=/opt/hugepool HUGEPOOL_DIR=/opt/hugepool/lib/cmake "$probe" 0 0 2>&1 >/dev/null)
[[ -z $err ]] && pass "HUGEPOOL_ROOT, HUGEPOOL_DIR: nothing on stderr" || fail "stderr: $err"
echo "$fails failure(s)"
((fails == 0))

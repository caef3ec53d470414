#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The installed helper (setgid, run as nobody) trusts nothing it inherits:
# environment, descriptors, argv, and it is built hardened.
source "$(dirname "$0")/lib.sh"

# --- the test tree's predictable parent: a copy planted by a user is not used ---
probe=$(mktemp -d /var/tmp/hugepool-reserve-probe.XXXXXX)
on_exit "rm -rf '$probe'"
chmod 1777 "$probe" # like /var/tmp
t=$probe/hugepool-reserve-test-0123456789ab
setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "mkdir -m 0777 '$t' && mkdir '$t/fake' && ln -s /etc '$t/real'"
ensure_test_dir "$t" 2>/dev/null
expect_eq "$(stat -c '%F %u %a' "$t")/$(ls -A "$t")" "directory 0 755/" "a user's directory replaced by a fresh root-owned one"
rmdir "$t"
setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "mkdir '$probe/theirs' && touch '$probe/theirs/x' && ln -s '$probe/theirs' '$t'"
ensure_test_dir "$t" 2>/dev/null
expect_eq "$(stat -c '%F %u %a' "$t")/$(ls -A "$probe/theirs")" "directory 0 755/x" "a symlink replaced, its target untouched"
rmdir "$t"
mkdir -m 0777 "$t"
ensure_test_dir "$t" 2>/dev/null
expect_eq "$(stat -c '%F %u %a' "$t")" "directory 0 755" "a root-owned directory with the wrong mode replaced"
touch "$t/keep"
ensure_test_dir "$t"
[[ -e $t/keep ]] || fail "a good test directory was emptied"
pass "a root-owned 0755 directory is used as it is"

fake_setup

# --- hostile environment: the helper's own environment is empty ---
marker=$INST/marker
hostile=(LD_PRELOAD="$INST/tools/libmarker_preload.so" LD_AUDIT="$INST/tools/libmarker_preload.so"
  HUGEPOOL_TEST_MARKER="$marker" SHELLOPTS=xtrace PS4='$(touch '"$marker"')' BASH_ENV="$INST/bashenv"
  GLIBC_TUNABLES=glibc.malloc.check=3:glibc.malloc.mmap_threshold=1 PATH="$INST/evil" IFS=/ LANG=xx_XX.UTF-8
  LOCPATH="$INST/evil" NLSPATH="$INST/evil" TZ=../../../etc/shadow)
echo "touch '$marker'" >"$INST/bashenv"
# Control: the same environment does load the marker into an ordinary program.
rm -f "$marker"
env "${hostile[@]}" /usr/bin/true
[[ -e $marker ]] || fail "control: marker library did not run in a normal program"
rm -f "$marker"
set +e
OUT=$(setpriv --reuid=65534 --regid=65534 --clear-groups env -i "${hostile[@]}" "$HELPER" --test-env 2>&1)
RC=$?
set -e
expect_eq "$RC" 0 "helper runs with a hostile environment"
grep -qx 'env-count: 0' <<<"$OUT" || fail "helper's environment not empty: $OUT"
pass "helper's own environment is empty"
[[ ! -e $marker ]] || fail "LD_PRELOAD/LD_AUDIT/BASH_ENV/PS4 code ran in the helper"
pass "no preload/audit library or shell hook ran"
# And a real grant under the hostile environment works and leaves no trace.
set_pool 0 0
set +e
setpriv --reuid=65534 --regid=65534 --clear-groups env -i "${hostile[@]}" "$HELPER" 5 >/dev/null 2>&1
RC=$?
set -e
expect_eq "$RC/$(nr)" "0/5" "grant under hostile environment"
[[ ! -e $marker ]] || fail "marker appeared during a grant"

# --- umask and descriptors ---
grep -qx 'umask: 077' <<<"$OUT" || fail "umask not 077: $OUT"
pass "umask 077"
set +e
OUT=$(setpriv --reuid=65534 --regid=65534 --clear-groups bash -c \
  'exec 7>"$1/leak7" 9</etc/passwd 200>"$1/leak200"; exec "$2" --test-env' _ "$INST" "$HELPER" 2>&1)
set -e
grep -qx 'fds: 0 1 2' <<<"$OUT" || fail "inherited descriptors not closed: $OUT"
pass "leaked descriptors 7, 9, 200 closed"
# Closed stdin/stdout/stderr: messages must not land in a pool file.
set_pool 0 0
set +e
setpriv --reuid=65534 --regid=65534 --clear-groups bash -c 'exec "$1" 7 <&- >&- 2>&-' _ "$HELPER"
RC=$?
set -e
expect_eq "$RC" 0 "grant with fds 0-2 closed"
expect_eq "$(cat "$(fake_pool nr_hugepages)")" 7 "pool file holds only the number"
expect_eq "$(cat "$FAKE/var/lib/hugepool/grants" | grep -c '^65534 ')" 1 "grant table intact"

# --- argc == 0 (the kernel turns it into argv[0] == ""): refused, no change ---
set_pool 0 0
before=$(cat "$FAKE/var/lib/hugepool/grants")
set +e
OUT=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$INST/tools/execve_argc0" "$HELPER" 100 --release 2>&1)
RC=$?
set -e
expect_eq "$RC" 2 "argc == 0 refused"
expect_eq "$OUT" "" "argc == 0: no output"
expect_eq "$(nr)/$(cat "$FAKE/var/lib/hugepool/grants")" "0/$before" "argc == 0: nothing changed"

# --- bad numbers and arguments: usage error, nothing changed ---
set_pool 0 0
bad_args=("" "-1" "+1" "0" "01" "1e3" "0x10" " 1" "1 " $'1\n' "1.5" "10000001" "99999999999999999999999"
  "٣" "1,000" "--node" "--size")
for a in "${bad_args[@]}"; do
  as_nobody "$a"
  [[ $RC == 2 && $(nr) == 0 ]] || fail "bad PAGES '$a': exit $RC, pool $(nr)"
done
pass "${#bad_args[@]} bad PAGES values refused"
bad_lists=("1 --node -1" "1 --node 1024" "1 --node 01" "1 --node x" "1 --size 4M" "1 --size 2.0M" "1 2"
  "--status 1" "--release --status" "1 --bogus" "--size 2M" "--test-envx")
for l in "${bad_lists[@]}"; do
  read -ra words <<<"$l"
  as_nobody "${words[@]}"
  [[ $RC == 2 && $(nr) == 0 ]] || fail "bad arguments '$l': exit $RC, pool $(nr)"
done
pass "${#bad_lists[@]} bad argument lists refused"
as_nobody 1 --node 7
expect_rc 1 "a node that does not exist is refused"
expect_err "no 2048 kB pool on node 7" "message names the missing pool"

# --- the binaries: hardened, and no way to run another program ---
for b in "$RESERVE_BIN_DIR/hugepool-reserve" "$HELPER"; do
  # (captured first: grep -q closing a pipe early would trip pipefail)
  dyn=$(readelf -dW "$b") seg=$(readelf -lW "$b") syms=$(readelf --dyn-syms -W "$b")
  grep -Eq 'FLAGS_1.*(NOW.*PIE|PIE.*NOW)' <<<"$dyn" || fail "$b: not PIE with BIND_NOW"
  grep -q 'GNU_RELRO' <<<"$seg" || fail "$b: no RELRO"
  grep 'GNU_STACK' <<<"$seg" | grep -q 'RW ' || fail "$b: executable stack"
  grep -q '__[a-z]*_chk@' <<<"$syms" || fail "$b: no _FORTIFY_SOURCE checks"
  grep -q '__stack_chk_fail@' <<<"$syms" || fail "$b: no stack protector"
  if grep -Ew 'UND (system|popen|execve|execv|execvp|execl|execlp|fork|vfork|posix_spawn|dlopen)(@.*)?$' <<<"$syms"; then
    fail "$b imports a way to run programs"
  fi
done
pass "full RELRO, PIE, NX stack, _FORTIFY_SOURCE, stack protector; no exec/system/fork imports"

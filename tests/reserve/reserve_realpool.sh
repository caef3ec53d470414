#!/usr/bin/env bash
# The real kernel pool: the installed setgid helper, run as nobody, resizes
# /sys/kernel/mm/hugepages (and a NUMA node's pool), refuses to shrink below
# pages in use, and the pool ends as it started.  Holds the machine-wide pool
# lock for its whole run.
source "$(dirname "$0")/lib.sh"
exec 9>/tmp/hugepool-pool.lock
flock -w 300 9 || fail "pool lock busy for 300 s"

sys=/sys/kernel/mm/hugepages/hugepages-2048kB
node0=/sys/devices/system/node/node0/hugepages/hugepages-2048kB
real_nr() { cat "$sys/nr_hugepages"; }
meminfo() { awk -v k="$1:" '$1 == k { print $2 }' /proc/meminfo; }
spare() { echo $(($(cat "$sys/free_hugepages") - $(cat "$sys/resv_hugepages"))); }

base=$(real_nr)
base_node0=$(cat "$node0/nr_hugepages" 2>/dev/null || echo none)
# Remember the sysfs modes install.sh changes, and put everything back.
mapfile -t files < <(ls /sys/kernel/mm/hugepages/hugepages-*/nr_hugepages \
  /sys/devices/system/node/node*/hugepages/hugepages-*/nr_hugepages 2>/dev/null)
modes=()
for f in "${files[@]}"; do modes+=("$(stat -c '%a %u %g' "$f")"); done
restore() {
  local i m
  for i in "${!files[@]}"; do
    read -ra m <<<"${modes[i]}"
    chown "${m[1]}:${m[2]}" "${files[i]}"
    chmod "${m[0]}" "${files[i]}"
  done
  [[ $base_node0 == none ]] || echo "$base_node0" >"$node0/nr_hugepages"
  echo "$base" >"$sys/nr_hugepages"
}
on_exit restore

REAL=$RESERVE_TEST_DIR/real
rm -rf "$REAL"
mkdir -p "$REAL/etc/hugepool"
chmod 0755 "$RESERVE_TEST_DIR" "$REAL"
cat >"$REAL/etc/hugepool/reserve.conf" <<CONF
max_pages 64
max_fraction 0.5
min_free_mb 1024
group nogroup
CONF
make_inst_dir
bash "$RESERVE_SRC/install.sh" --bin "$RESERVE_BIN_DIR/hugepool-reserve-realpool" --prefix "$INST" \
  --conf "$REAL/etc/hugepool/reserve.conf" --state-dir "$REAL/var/lib/hugepool" \
  --jobs-dir "$REAL/run/hugepool/jobs" --sysfs-root / --tmpfiles-dir "$INST/tmpfiles" >/dev/null
HELPER=$INST/bin/hugepool-reserve
expect_eq "$(stat -c '%a %G' "$sys/nr_hugepages")" "664 hugepool" "install: sysfs file writable by the helper's group"
grep -q "^z /sys/kernel/mm/hugepages/hugepages-\*/nr_hugepages 0664 root hugepool -$" "$INST/tmpfiles/hugepool.conf" ||
  fail "tmpfiles rule missing"
# nobody itself cannot write the pool (it is not in the group): only the helper can.
if setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "echo 1 > $sys/nr_hugepages" 2>/dev/null; then
  fail "nobody could write the pool directly"
fi
pass "nobody cannot write the pool without the helper"

free0=$(meminfo HugePages_Free)
as_nobody 16
expect_rc 0 "real grant of 16 pages"
expect_eq "$(real_nr)" $((base + 16)) "sysfs nr_hugepages grew by 16"
expect_eq "$(meminfo HugePages_Total)/$(meminfo HugePages_Free)" "$((base + 16))/$((free0 + 16))" \
  "/proc/meminfo agrees"
as_nobody 16
expect_eq "$RC/$(real_nr)" "0/$((base + 16))" "a repeated call adds nothing"

granted=16
if [[ $base_node0 != none ]]; then
  granted=20
  as_nobody 4 --node 0
  expect_eq "$RC/$(cat "$node0/nr_hugepages")" "0/$((base_node0 + 16 + 4))" "NUMA node 0 pool grew by 4"
fi
as_nobody 100
expect_rc 1 "max_pages enforced on the real pool"
expect_eq "$(real_nr)" $((base + granted)) "pool unchanged by the refusal"

# Take all but one spare page into use: the release must be refused.
hold=$(($(spare) - 1))
coproc HOLD { exec "$RESERVE_TOOLS/hugetlb_hold" "$hold"; }
on_exit "kill $HOLD_PID 2>/dev/null"
read -r -t 30 held <&"${HOLD[0]}" || fail "could not map $hold hugetlb pages"
expect_eq "$held" "held $hold" "holding $hold pages in use"
before=$(real_nr)
as_nobody --release
expect_rc 1 "release below the pages in use refused"
expect_err "in use or reserved" "refusal names the reason"
expect_eq "$(real_nr)" "$before" "pool not shrunk while pages are in use"
exec {HOLD[1]}>&-
wait "$HOLD_PID" || true
as_nobody --release
expect_rc 0 "release after the pages are free"
expect_eq "$(real_nr)" "$base" "pool back to where it started"
[[ $base_node0 == none ]] || expect_eq "$(cat "$node0/nr_hugepages")" "$base_node0" "node 0 back too"

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A job's reservation limit never exceeds what its user holds (limits.c), on
# the real pool and real hugetlb cgroup limit files made as the Slurm plugin
# makes them (job cgroups with limit files handed to the helper's group,
# root-owned registry entries), without Slurm.  Two users, A in job 5151 and
# B in job 5252: A's release must lower A's job limit, so that A cannot map B's
# granted pages; release and grant again must not ratchet the limit; a limit
# that drifted above the grants is lowered.  After every operation the kernel's
# limit files are checked against the grant table (limits_within_grants).
source "$(dirname "$0")/lib.sh"
real_pool_setup - <<CONF
max_pages 10
max_fraction 0.5
min_free_mb 1024
group nogroup
require_job yes
CONF
cg_setup
[[ -n $cg_mnt ]] || { echo "SKIP: no hugetlb cgroup controller on this node" >&2; exit 77; }
if [[ $cg_mnt == "$cg_v2" ]]; then # what the plugin does before its first job
  echo +hugetlb >"$cg_v2/cgroup.subtree_control"
  mkdir -p "$cg_v2/hugepool"
  echo +hugetlb >"$cg_v2/hugepool/cgroup.subtree_control"
else
  mkdir -p "$cg_mnt/hugepool"
fi
REG=$REAL/run/hugepool/jobs
TABLE=$REAL/var/lib/hugepool/grants
MAP=$INST/tools/hugetlb_map
A=4242
B=4343
hgid=$(stat -c %g "$REAL/var/lib/hugepool/lock")
mkdir -p "$REG"
on_exit "rm -f '$REG'/5151* '$REG'/5252*"
make_job() { # id uid: the job's cgroup (limits 0) and registry entries, as the plugin's prolog leaves them
  local d=$cg_mnt/hugepool/job_$1 f
  mkdir "$d"
  for f in "$d"/hugetlb.*.rsvd.max "$d"/hugetlb.*.rsvd.limit_in_bytes; do
    [[ -e $f ]] || continue
    echo 0 >"$f"
    chgrp "$hgid" "$f"
    chmod 0664 "$f"
  done
  echo "$2" >"$REG/$1"
  echo "isolated 0 0" >"$REG/$1.iso"
}
make_job 5151 $A
make_job 5252 $B
# (the straggler-free end of a job: nothing is left in these cgroups)
on_exit "rmdir '$cg_mnt/hugepool/job_5151' '$cg_mnt/hugepool/job_5252' 2>/dev/null"
in_job() { # id uid command...: run as uid inside the job's cgroup; sets OUT, RC
  local id=$1 uid=$2
  shift 2
  set +e
  OUT=$(sh -c 'echo $$ >"$1/cgroup.procs" && shift 2 && exec setpriv --reuid="$0" --regid=65534 --clear-groups "$@"' \
    "$uid" "$cg_mnt/hugepool/job_$id" _ "$@" 2>&1)
  RC=$?
  set -e
}
lim() { cg_pages "$cg_mnt/hugepool/job_$1" max; }
checked() { # what: the rule holds now
  local out
  out=$(limits_within_grants "$cg_mnt" "$REG" "$TABLE") ||
    fail "$1: a job's reservation limit exceeds its user's grants: $out (table: $(grep -v '^end' "$TABLE" | tr '\n' ' '))"
  pass "$1 (limits within grants: $(tr '\n' ';' <<<"$out"))"
}

in_job 5252 $B "$HELPER" 4
expect_eq "$RC/$(lim 5252)/$(real_nr)" "0/4/$((base + 4))" "B in job 5252 is granted 4: its limit 4, pool +4"
checked "after B's grant"
in_job 5151 $A "$HELPER" 4
expect_eq "$RC/$(lim 5151)/$(real_nr)" "0/4/$((base + 8))" "A in job 5151 is granted 4: its limit 4, pool +8"
checked "after A's grant"
in_job 5151 $A "$HELPER" --release
expect_eq "$RC/$(real_nr)" "0/$((base + 4))" "A's release gives back its 4"
expect_eq "$(lim 5151)" 0 "A's release lowers its job's limit to what A keeps (0)"
checked "after A's release"
in_job 5151 $A "$MAP" 4
grep -qx 'mmap 4: ENOMEM' <<<"$OUT" || fail "A mapped pages after its release (B's): $OUT"
pass "A cannot map 4 pages after its release (B's grant is not A's)"
in_job 5252 $B "$MAP" 4
grep -qx 'mapped 4 hugetlb_kb 8192' <<<"$OUT" || fail "B could not map its own 4 granted pages: $OUT"
pass "B maps its own 4 granted pages"
checked "after the mappings"

# Release and grant again: the limit is the grant, it never ratchets.
for round in 1 2 3 4; do
  in_job 5151 $A "$HELPER" --release
  checked "round $round: after A's release"
  ask=$(($(lim 5151) + 8))
  in_job 5151 $A "$HELPER" $ask
  [[ $RC == 0 ]] || fail "round $round: A's grant of $ask: $OUT"
  held=$(awk -v u=$A '$1 == u && $3 == 2048 { s += $4 } END { print s + 0 }' "$TABLE")
  ((held <= 10 && $(lim 5151) <= held)) || fail "round $round: A's job limit $(lim 5151) with $held pages held (max_pages 10): $OUT"
  checked "round $round: A asked for $ask, holds $held, job limit $(lim 5151)"
done
in_job 5151 $A "$HELPER" --release
expect_eq "$RC/$(lim 5151)/$(real_nr)" "0/0/$((base + 4))" "A's last release: limit 0, only B's pages left"
checked "after A's last release"

# A release while the job maps pages keeps them, and the limit with them.
in_job 5151 $A "$HELPER" 4
expect_eq "$RC/$(lim 5151)" "0/4" "A is granted 4 again"
checked "after A's grant of 4 again"
S=$(mktemp -d /var/tmp/hugepool-jobs.XXXXXX)
chmod 0777 "$S"
on_exit "touch '$S/release'; sleep 0.3; rm -rf '$S'"
sh -c 'echo $$ >"$1/cgroup.procs" && exec setpriv --reuid='$A' --regid=65534 --clear-groups "$2" 3 "$3/held" "$3/release"' \
  _ "$cg_mnt/hugepool/job_5151" "$MAP" "$S" >"$S/map.out" 2>&1 &
holder=$!
for _ in $(seq 100); do [[ -e $S/held ]] && break; sleep 0.1; done
[[ -e $S/held ]] || fail "A's holder did not map: $(cat "$S/map.out")"
in_job 5151 $A "$HELPER" --release
expect_eq "$RC/$(lim 5151)/$(real_nr)" "1/3/$((base + 7))" "a release while the job maps 3 pages keeps 3, and the job's limit 3"
grep -q 'kept 3 of 4 pages' <<<"$OUT" || fail "no reason given: $OUT"
checked "after a release that kept the mapped pages"
touch "$S/release"
wait "$holder"
in_job 5151 $A "$HELPER" --release
expect_eq "$RC/$(lim 5151)/$(real_nr)" "0/0/$((base + 4))" "released once the pages are unmapped"
checked "after the release once the pages are unmapped"

# A release while another user's job maps part of its grant, shared by two
# of its processes: the setgid helper cannot read B's mappings; it counts
# what B's job cgroup has reserved (the kernel charges each page once), so
# A's pages go, B's unmapped 2 stay promised, and B then maps them.
cp "$RESERVE_TOOLS/hugetlb_share" "$INST/tools/"
chmod a+rx "$INST/tools/hugetlb_share"
in_job 5151 $A "$HELPER" 4
expect_eq "$RC/$(real_nr)" "0/$((base + 8))" "A is granted 4 again"
# Free pages the pool had before the test would cover for B: out for now.
trim=$(($(spare) - 8))
echo $(($(real_nr) - trim)) >"$sys/nr_hugepages"
expect_eq "$(spare)" 8 "only A's and B's granted pages are free"
mkfifo "$S/share.in"
sh -c 'echo $$ >"$1/cgroup.procs" && exec setpriv --reuid='$B' --regid=65534 --clear-groups "$2" anon 2' \
  _ "$cg_mnt/hugepool/job_5252" "$INST/tools/hugetlb_share" <"$S/share.in" >"$S/share.out" 2>&1 &
sharer=$!
on_exit "kill $sharer 2>/dev/null; wait $sharer 2>/dev/null" # (before its cgroup is removed)
exec {share_in}>"$S/share.in"
for _ in $(seq 100); do [[ -s $S/share.out ]] && break; sleep 0.1; done
expect_eq "$(cat "$S/share.out")/$(cg_pages "$cg_mnt/hugepool/job_5252" current)" "shared 2/2" \
  "B's job maps 2 pages in two processes: its cgroup has reserved 2"
in_job 5151 $A "$HELPER" --release
expect_eq "$RC/$(spare)" "0/2" "A's release while B's job shares 2 of its 4 pages: A's 4 go, B's 2 unmapped stay"
in_job 5252 $B "$MAP" 2
grep -qx 'mapped 2 hugetlb_kb 4096' <<<"$OUT" || fail "B could not map the rest of its grant: $OUT"
pass "B maps the rest of its grant"
exec {share_in}>&-
wait "$sharer" || true
checked "after A's release next to B's shared pages"
echo $(($(real_nr) + trim)) >"$sys/nr_hugepages"
expect_eq "$(real_nr)" $((base + 4)) "the pool's own free pages back"

# A limit that drifted above the grants (set by hand here: a table restored
# from a backup, a limit write that outlived its grant) is lowered by the next
# grant in the job, and the grant covers the new limit.
echo $((6 << 21)) >"$cg_mnt/hugepool/job_5151/hugetlb.2MB.rsvd.$([[ -e $cg_mnt/hugepool/job_5151/hugetlb.2MB.rsvd.max ]] && echo max || echo limit_in_bytes)"
in_job 5151 $A "$HELPER" 2
expect_eq "$RC/$(lim 5151)/$(real_nr)" "0/2/$((base + 6))" "a drifted limit of 6 with nothing held: 'hugepool-reserve 2' grants 2, limit 2"
checked "after the drifted limit was repaired"
in_job 5151 $A "$HELPER" --release
checked "after A's final release"
in_job 5252 $B "$HELPER" --release
checked "after B's final release"
expect_eq "$(lim 5151)/$(lim 5252)/$(real_nr)" "0/0/$base" "both released: limits 0, the pool as it was"
checked "at the end"

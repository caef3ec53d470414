# Shared by the hugepool-reserve shell tests (sourced, not run).
# Environment from ctest: RESERVE_BIN_DIR (built helpers), RESERVE_TOOLS (test
# tools), RESERVE_TEST_DIR (compiled-in fake/real trees), RESERVE_SRC.
set -euo pipefail
: "${RESERVE_BIN_DIR:?}" "${RESERVE_TOOLS:?}" "${RESERVE_TEST_DIR:?}" "${RESERVE_SRC:?}"
FAKE=$RESERVE_TEST_DIR/fake
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
HELPER=
INST=
_cleanups=()

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }
expect_eq() { [[ $1 == "$2" ]] || fail "$3: expected '$2', got '$1'"; pass "$3"; }
on_exit() { _cleanups+=("$1"); }
# A /dev/log socket nobody listens on (left by a test that was killed before
# its cleanup) is not a system logger: remove it, so the audit checks run.
# Call with the devlog lock held.
devlog_drop_stale() {
  [[ -S /dev/log ]] || return 0
  python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
try:
    s.connect("/dev/log")
except ConnectionRefusedError:
    sys.exit(0)
sys.exit(1)' && rm -f /dev/log
  return 0
}
_run_cleanups() {
  local i
  for ((i = ${#_cleanups[@]} - 1; i >= 0; i--)); do eval "${_cleanups[i]}" || true; done
}
trap _run_cleanups EXIT

# The compiled-in test tree's parent ($RESERVE_TEST_DIR) has a predictable
# name in world-writable /var/tmp, and these tests run as root and install
# setgid binaries below it: a local user who created it first would control
# the tree.  Use it only as a root-owned 0755 directory that is not a symlink;
# anything else there is removed (rm does not follow symlinks) and the
# directory made anew with mkdir (no -p: it must be ours).
ensure_test_dir() { # [dir]
  local d=${1:-$RESERVE_TEST_DIR} what
  what=$(stat -c '%F %u %a' -- "$d" 2>/dev/null || echo none)
  [[ $what == "directory 0 755" ]] && return 0
  if [[ $what != none ]]; then
    echo "note: $d was not a root-owned 0755 directory ($what): removing it" >&2
    rm -rf --one-file-system -- "$d" || fail "cannot remove $d"
  fi
  mkdir -m 0755 -- "$d" 2>/dev/null || true # (another test may have just made it)
  what=$(stat -c '%F %u %a' -- "$d" 2>/dev/null || echo none)
  [[ $what == "directory 0 755" ]] || fail "$d is not a root-owned 0755 directory ($what): someone else made it; remove it"
}

# A tmp dir every user can traverse, on a filesystem that honours setgid.
make_inst_dir() {
  INST=$(mktemp -d /var/tmp/hugepool-reserve-test.XXXXXX)
  chmod 0755 "$INST"
  on_exit "rm -rf '$INST'"
  # Tools an unprivileged user runs or might load: copies they can reach.
  mkdir -p "$INST/tools"
  cp "$RESERVE_TOOLS/execve_argc0" "$RESERVE_TOOLS/libmarker_preload.so" "$RESERVE_TOOLS/hugetlb_hold" \
    "$RESERVE_TOOLS/hugetlb_map" "$INST/tools/"
  [[ ! -e $RESERVE_TOOLS/kill_on_change ]] || cp "$RESERVE_TOOLS/kill_on_change" "$INST/tools/"
  chmod -R a+rX "$INST/tools"
  if findmnt -n -o OPTIONS -T "$INST" | tr ',' '\n' | grep -qx nosuid; then
    fail "/var/tmp is mounted nosuid: cannot test a setgid install"
  fi
}

# --- the fake tree: /sys, /proc/meminfo, /etc, /var, /run below $FAKE ---
fake_pool() { echo "$FAKE/sys/kernel/mm/hugepages/hugepages-${2:-2048}kB/$1"; }
fake_node() { echo "$FAKE/sys/devices/system/node/node$1/hugepages/hugepages-${3:-2048}kB/$2"; }
fake_meminfo() { # total_kb avail_kb hugetlb_kb
  printf 'MemTotal:       %s kB\nMemFree:        %s kB\nMemAvailable:   %s kB\nHugePages_Total:       0\nHugetlb:        %s kB\n' \
    "$1" "$2" "$2" "$3" >"$FAKE/proc/meminfo"
}
fake_proc() { # pid ruid hugetlb_kb: a process in the fake /proc (only what the helper reads:
  # its status, and its smaps with one private hugetlb mapping of that size)
  mkdir -p "$FAKE/proc/$1"
  printf 'Name:\tapp\nState:\tS (sleeping)\nUid:\t%s\t%s\t%s\t%s\nGid:\t0\t0\t0\t0\nHugetlbPages:\t%8s kB\n' \
    "$2" "$2" "$2" "$2" "$3" >"$FAKE/proc/$1/status"
  printf '7f0000000000-%x rw-p 00000000 00:10 4321                       /anon_hugepage (deleted)\nKernelPageSize:     2048 kB\nShared_Hugetlb:        0 kB\nPrivate_Hugetlb: %8s kB\n' \
    $((0x7f0000000000 + ($3 + 2048) * 1024)) "$3" >"$FAKE/proc/$1/smaps"
}
fake_node_meminfo() { # node total_kb free_kb
  printf 'Node %s MemTotal:       %s kB\nNode %s MemFree:        %s kB\nNode %s MemUsed:        0 kB\n' \
    "$1" "$2" "$1" "$3" "$1" >"$FAKE/sys/devices/system/node/node$1/meminfo"
}
write_conf() { rm -f "$FAKE/etc/hugepool/reserve.conf"; cat >"$FAKE/etc/hugepool/reserve.conf"; chmod 0644 "$FAKE/etc/hugepool/reserve.conf"; }
default_conf() {
  write_conf <<CONF
max_pages 1000
max_fraction 0.5
min_free_mb 1024
group nogroup
CONF
}

fake_setup() {
  ensure_test_dir
  rm -rf "$FAKE"
  mkdir -m 0755 "$FAKE"
  mkdir -p "$FAKE/proc" "$FAKE/etc/hugepool"
  on_exit "rm -rf '$FAKE'; rmdir '$RESERVE_TEST_DIR' 2>/dev/null"
  local kb n
  for kb in 2048 1048576; do
    mkdir -p "$FAKE/sys/kernel/mm/hugepages/hugepages-${kb}kB"
    for f in nr free resv surplus; do echo 0 >"$(fake_pool ${f}_hugepages $kb)"; done
    for n in 0 1; do
      mkdir -p "$FAKE/sys/devices/system/node/node$n/hugepages/hugepages-${kb}kB"
      for f in nr free surplus; do echo 0 >"$(fake_node $n ${f}_hugepages $kb)"; done
    done
  done
  fake_meminfo 16777216 12582912 0
  fake_node_meminfo 0 8388608 6291456
  fake_node_meminfo 1 8388608 6291456
  default_conf
  make_inst_dir
  bash "$RESERVE_SRC/install.sh" --bin "$RESERVE_BIN_DIR/hugepool-reserve-fake" --prefix "$INST" \
    --conf "$FAKE/etc/hugepool/reserve.conf" --state-dir "$FAKE/var/lib/hugepool" \
    --jobs-dir "$FAKE/run/hugepool/jobs" --sysfs-root "$FAKE" --tmpfiles-dir "$INST/tmpfiles" >/dev/null
  # The fake "kernel" inside the test build updates free_hugepages too.
  chgrp hugepool "$FAKE"/sys/kernel/mm/hugepages/*/free_hugepages "$FAKE"/sys/devices/system/node/*/hugepages/*/free_hugepages
  chmod 0664 "$FAKE"/sys/kernel/mm/hugepages/*/free_hugepages "$FAKE"/sys/devices/system/node/*/hugepages/*/free_hugepages
  HELPER=$INST/bin/hugepool-reserve
  [[ $(stat -c '%a %U %G' "$HELPER") == "2711 root hugepool" ]] || fail "install mode: $(stat -c '%a %U %G' "$HELPER")"
}

set_pool() { # nr free [resv]: a fresh pool (empty NUMA node pools) and an empty grant table
  : >"$FAKE/var/lib/hugepool/grants"
  local n
  for n in 0 1; do echo 0 >"$(fake_node $n nr_hugepages)"; echo 0 >"$(fake_node $n free_hugepages)"; done
  echo "$1" >"$(fake_pool nr_hugepages)"
  echo "$2" >"$(fake_pool free_hugepages)"
  echo "${3:-0}" >"$(fake_pool resv_hugepages)"
}
nr() { cat "$(fake_pool nr_hugepages)"; }
seal() { # grant table body on stdin -> the table with its end line (FNV-1a 64 of the body)
  python3 -c 'import sys
b = sys.stdin.buffer.read()
h = 0xcbf29ce484222325
for c in b:
    h = ((h ^ c) * 0x100000001b3) & 0xffffffffffffffff
sys.stdout.buffer.write(b + b"end %016x\n" % h)'
}

# Run the installed helper as nobody; sets OUT, ERR, RC.
as_user() { # uid helper-args...
  local uid=$1
  shift
  set +e
  OUT=$(setpriv --reuid="$uid" --regid=65534 --clear-groups "$HELPER" "$@" 2>"$INST/err")
  RC=$?
  set -e
  ERR=$(cat "$INST/err")
}
as_nobody() { as_user 65534 "$@"; }
expect_rc() { [[ $RC == "$1" ]] || fail "$2: exit $RC, expected $1 (stdout: $OUT; stderr: $ERR)"; pass "$2"; }
expect_err() { grep -q -- "$1" <<<"$ERR" || fail "$2: stderr lacks '$1': $ERR"; pass "$2"; }

# --- the real pool (hugepool-reserve-realpool: real sysfs, config/state in the build dir) ---
sys=/sys/kernel/mm/hugepages/hugepages-2048kB
node0=/sys/devices/system/node/node0/hugepages/hugepages-2048kB
real_nr() { cat "$sys/nr_hugepages"; }
meminfo() { awk -v k="$1:" '$1 == k { print $2 }' /proc/meminfo; }
spare() { echo $(($(cat "$sys/free_hugepages") - $(cat "$sys/resv_hugepages"))); }
# The helper's config in the real-pool tests unless one brings its own:
# 64 pages a grant at most, half the pool, 1 GB of memory kept free.
real_pool_conf() { printf 'max_pages 64\nmax_fraction 0.5\nmin_free_mb 1024\ngroup nogroup\n'; }
# real_pool_setup [-]: takes the machine-wide pool lock
# (tests/pool/pool-lock.sh: it remembers and restores the pool), remembers
# the sysfs modes and restores them on exit, installs the helper with
# real_pool_conf's config, or with `-` the config read from stdin; sets
# HELPER, TABLE and LOCK.
source "$(dirname "${BASH_SOURCE[0]}")/../pool/pool-lock.sh"
real_pool_setup() {
  pool_hold
  base=$(real_nr)
  base_node0=$(cat "$node0/nr_hugepages" 2>/dev/null || echo none)
  mapfile -t _files < <(ls /sys/kernel/mm/hugepages/hugepages-*/nr_hugepages \
    /sys/devices/system/node/node*/hugepages/hugepages-*/nr_hugepages 2>/dev/null)
  _modes=()
  local f
  for f in "${_files[@]}"; do _modes+=("$(stat -c '%a %u %g' "$f")"); done
  on_exit _real_pool_restore
  REAL=$RESERVE_TEST_DIR/real
  ensure_test_dir
  rm -rf "$REAL"
  mkdir -m 0755 "$REAL"
  mkdir -p "$REAL/etc/hugepool"
  on_exit "rm -rf '$REAL'; rmdir '$RESERVE_TEST_DIR' 2>/dev/null"
  if [[ ${1:-} == - ]]; then cat; else real_pool_conf; fi >"$REAL/etc/hugepool/reserve.conf"
  make_inst_dir
  bash "$RESERVE_SRC/install.sh" --bin "$RESERVE_BIN_DIR/hugepool-reserve-realpool" --prefix "$INST" \
    --conf "$REAL/etc/hugepool/reserve.conf" --state-dir "$REAL/var/lib/hugepool" \
    --jobs-dir "$REAL/run/hugepool/jobs" --sysfs-root / --tmpfiles-dir "$INST/tmpfiles" >/dev/null
  HELPER=$INST/bin/hugepool-reserve
  TABLE=$REAL/var/lib/hugepool/grants
  LOCK=$REAL/var/lib/hugepool/lock
}
# The pages the real pool's table charges to nobody (uid 65534), and the
# pages the pool holds for an unsettled intent in it: a grant's pages that
# came, a release's pages that did not go yet.
real_charged() { awk '$1 == 65534 { s += $4 } END { print s + 0 }' "$TABLE"; }
real_pending() {
  awk -v nr="$(real_nr)" '$1 == "intent" { d = nr - $5; if (d < 0) d = 0; if (d > $6) d = $6; p += d }
    $1 == "release" { d = $5 - nr; if (d < 0) d = 0; if (d > $6) d = $6; p += $6 - d } END { print p + 0 }' "$TABLE"
}
_real_pool_restore() {
  local i m
  for i in "${!_files[@]}"; do
    read -ra m <<<"${_modes[i]}"
    chown "${m[1]}:${m[2]}" "${_files[i]}"
    chmod "${m[0]}" "${_files[i]}"
  done
  pool_release
}

# --- the test Slurms: slurm_lib.sh (one node on 127.0.0.1), tests/cluster/slurm.sh (the bed's nodes) ---
# slurm_conf_write DIR HEAD...: DIR/slurm.conf, written here alone: the lines
# HEAD (cluster name, controller host, ports), then what every test Slurm
# shares (root daemons, munge on DIR/munge.sock, the SPANK plugins of
# DIR/plugstack.conf, the prolog at allocation, no accounting; its files in
# DIR, a slurmd's named by its node, %n), then its nodes and partitions from
# stdin.  Makes DIR/state and exports SLURM_CONF.
slurm_conf_write() {
  local dir=$1
  shift
  {
    printf '%s\n' "$@"
    cat <<EOF
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
SlurmdDebug=debug
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
PrologFlags=Alloc
PlugStackConfig=$dir/plugstack.conf
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
EOF
    cat
  } >"$dir/slurm.conf"
  chmod 0644 "$dir/slurm.conf"
  mkdir -p "$dir/state"
  export SLURM_CONF=$dir/slurm.conf
}

# --- hugetlb cgroups (cgroup.c) and the job limits (limits.c) ---
# The hierarchy the plugin will use (its own detection, in shell): cg_mnt,
# with cg_v2 / cg_v1 the mounts found.  Whatever jobs leave is checked by the
# tests; the hierarchy is put back as it was at the end (the plugin enables
# the controller in a cgroup2 root's subtree_control).
cg_setup() {
  cg_v2=$(awk '{ for (i = 7; i <= NF; i++) if ($i == "-") break; if ($(i + 1) == "cgroup2" && $4 == "/") { print $5; exit } }' /proc/self/mountinfo)
  cg_v1=$(awk '{ for (i = 7; i <= NF; i++) if ($i == "-") break; if ($(i + 1) == "cgroup" && $4 == "/" && $(i + 3) ~ /(^|,)hugetlb(,|$)/) { print $5; exit } }' /proc/self/mountinfo)
  cg_mnt=
  if [[ -n $cg_v2 ]] && grep -qw hugetlb "$cg_v2/cgroup.controllers" 2>/dev/null; then
    cg_mnt=$cg_v2
  elif [[ -n $cg_v1 ]]; then
    cg_mnt=$cg_v1
  fi
  if [[ -n $cg_mnt ]]; then
    _cg_had_dir=$([[ -d $cg_mnt/hugepool ]] && echo yes || echo no)
    _cg_had_ctrl=$([[ -n $cg_v2 ]] && grep -qw hugetlb "$cg_v2/cgroup.subtree_control" && echo yes || echo no)
    on_exit _cg_restore
  fi
}
_cg_restore() {
  [[ -n $cg_mnt ]] || return 0
  local d
  for d in "$cg_mnt"/hugepool/job_*; do [[ -d $d ]] && rmdir "$d"; done
  [[ $_cg_had_dir == yes ]] || rmdir "$cg_mnt/hugepool" 2>/dev/null || true
  if [[ $cg_mnt == "$cg_v2" && $_cg_had_ctrl == no ]]; then echo -hugetlb >"$cg_v2/cgroup.subtree_control" || true; fi
}
cg_jobs() { [[ -n $cg_mnt ]] && ls -d "$cg_mnt"/hugepool/job_* 2>/dev/null || true; } # job cgroups left
cg_pages() { # job-cgroup max|current [2MB|1GB]: the reservation counter in pages of that size (v2 or v1 names)
  local f=$1/hugetlb.${3:-2MB}.rsvd.$2 v
  [[ -e $f ]] || f=$1/hugetlb.${3:-2MB}.rsvd.$([[ $2 == max ]] && echo limit_in_bytes || echo usage_in_bytes)
  v=$(cat "$f")
  [[ $v == max ]] || ((v >= 1 << 62)) && echo max || echo $((v >> ($([[ ${3:-2MB} == 1GB ]] && echo 30 || echo 21))))
}

# The rule of limits.c, read from the kernel's limit files and the grant
# table (never from the helper): for every user and page size (2 MB, 1 GB),
# the sum over every job cgroup (<mnt>/hugepool/job_*) of the user's of (its
# reservation limit - the job's allowance, the third field of "isolated R A"
# in <job>.iso, 2 MB only) is at most their grants of that size.  A limited
# job cgroup that is not a registered job's counts against a user "?" who
# holds nothing: no limit may be left where no grant covers it.  Prints each
# user's numbers; returns 1 if the rule is broken.
# Args: the hierarchy's mount, the registry, the grant table.
limits_within_grants() {
  local mnt=$1 reg=$2 table=$3 d id uid lim allow iso size kb g ok=0
  declare -A sum=()
  for d in "$mnt"/hugepool/job_*; do
    [[ -d $d ]] || continue
    id=${d##*/job_}
    uid='?'
    [[ -f $reg/$id && $(stat -c %u "$reg/$id") == 0 ]] && uid=$(<"$reg/$id")
    for size in 2MB 1GB; do
      [[ -e $d/hugetlb.$size.rsvd.max || -e $d/hugetlb.$size.rsvd.limit_in_bytes ]] || continue
      lim=$(cg_pages "$d" max $size)
      [[ $lim != max ]] || continue
      allow=0
      if [[ $size == 2MB && -f $reg/$id.iso ]] && read -r iso _ allow <"$reg/$id.iso" && [[ $iso == isolated && $allow =~ ^[0-9]+$ ]]; then :; else allow=0; fi
      sum[$uid/$size]=$((${sum[$uid/$size]:-0} + (lim > allow ? lim - allow : 0)))
    done
  done
  for g in "${!sum[@]}"; do
    uid=${g%/*} size=${g#*/}
    kb=$([[ $size == 1GB ]] && echo 1048576 || echo 2048)
    g=$(awk -v u="$uid" -v k="$kb" '$1 == u && $3 == k { s += $4 } END { print s + 0 }' "$table")
    echo "uid $uid $size: job limits $((sum[$uid/$size])), grants $g"
    ((sum[$uid/$size] <= g)) || ok=1
  done
  return $ok
}

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs hugepool-reserve with least privilege: setgid to a dedicated group
# (default "hugepool") that alone may write the pool's sysfs files.  No
# setuid root.  Run as root.  Idempotent.
#
#   install.sh --bin build/setuid-helper/hugepool-reserve [options]
#     --prefix DIR       install DIR/bin/hugepool-reserve       (/usr/local)
#     --group NAME       privileged group of the helper          (hugepool)
#     --conf FILE        site config, created if missing         (*)
#     --state-dir DIR    lock and grant table                    (*)
#     --jobs-dir DIR     Slurm job registry                      (*)
#     --sysfs-root DIR   whose sys/ tree gets group write access (/)
#     --tmpfiles-dir DIR where the boot-time permission rule goes (/etc/tmpfiles.d; "none" to skip)
#     --users-group NAME value of "group" in a newly created config (hugepool-users)
# The paths must match the ones compiled into the binary (CMake cache
# HUGEPOOL_RESERVE_CONF, HUGEPOOL_RESERVE_STATE_DIR, HUGEPOOL_RESERVE_JOBS_DIR).
# (*) By default they are: read from the helper-paths.h generated next to
# the binary in its build tree, else the project's defaults from
# cmake/helper-paths.cmake; they are written nowhere else.
set -euo pipefail
umask 022
bin= prefix=/usr/local group=hugepool conf= state= jobs= sysroot=/ tmpfiles=/etc/tmpfiles.d users=hugepool-users
while (($#)); do
  case $1 in
    --bin) bin=$2 ;; --prefix) prefix=$2 ;; --group) group=$2 ;; --conf) conf=$2 ;;
    --state-dir) state=$2 ;; --jobs-dir) jobs=$2 ;; --sysfs-root) sysroot=$2 ;;
    --tmpfiles-dir) tmpfiles=$2 ;; --users-group) users=$2 ;;
    *) echo "install.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift 2
done
[[ $(id -u) -eq 0 ]] || { echo "install.sh: must run as root" >&2; exit 2; }
[[ -n $bin && -f $bin ]] || { echo "install.sh: --bin FILE is required" >&2; exit 2; }

# The compiled-in paths (see above): HELPER_PATH_* of the binary's build
# tree, or the HUGEPOOL_RESERVE_* defaults of cmake/helper-paths.cmake.
compiled_path() { # HELPER_PATH_NAME HUGEPOOL_RESERVE_NAME
  local header cmake v=
  header=$(dirname "$bin")/helper-paths.h
  cmake=$(dirname "${BASH_SOURCE[0]}")/../cmake/helper-paths.cmake
  [[ -f $header ]] && v=$(sed -n "s/^#define $1 \"\(.*\)\"\$/\1/p" "$header")
  [[ -n $v || ! -f $cmake ]] || v=$(sed -n "s/^set($2 \([^ ]*\) .*/\1/p" "$cmake")
  [[ -n $v ]] || { echo "install.sh: cannot tell the binary's $1: pass it (--conf, --state-dir, --jobs-dir)" >&2; exit 2; }
  echo "$v"
}
[[ -n $conf ]] || conf=$(compiled_path HELPER_PATH_CONF HUGEPOOL_RESERVE_CONF)
[[ -n $state ]] || state=$(compiled_path HELPER_PATH_STATE_DIR HUGEPOOL_RESERVE_STATE_DIR)
[[ -n $jobs ]] || jobs=$(compiled_path HELPER_PATH_JOBS_DIR HUGEPOOL_RESERVE_JOBS_DIR)

getent group "$group" >/dev/null || groupadd --system "$group"

# The binary: root-owned, setgid, executable but not readable by others.
install -d -m 0755 "$prefix/bin"
install -o root -g "$group" -m 2711 "$bin" "$prefix/bin/hugepool-reserve.new"
mv -f "$prefix/bin/hugepool-reserve.new" "$prefix/bin/hugepool-reserve"

# State: the helper never creates files (a setgid process would create them
# owned by the caller), so the lock and the grant table exist from here on.
install -d -o root -g "$group" -m 0750 "$state"
for f in lock grants; do
  [[ -f $state/$f ]] || install -o root -g "$group" -m 0660 /dev/null "$state/$f"
  chown root:"$group" "$state/$f"
  chmod 0660 "$state/$f"
done

# Job registry, written by the Slurm plugin (root) and read by the helper.
install -d -o root -g root -m 0755 "$jobs"

# Site config: root-owned, not writable by group or others (the helper checks).
install -d -o root -g root -m 0755 "$(dirname "$conf")"
if [[ ! -f $conf ]]; then
  cat >"$conf" <<CONF
# hugepool-reserve site limits (see setuid-helper/README.md)
# Most 2 MB pages one user may hold on this node (a 1 GB page counts 512).
max_pages 4096
# All hugetlb memory on the node may not exceed this fraction of MemTotal.
max_fraction 0.5
# MemAvailable that must remain after a grant, in MB.
min_free_mb 2048
# Only members of this group may use the helper.
group $users
# yes: the caller must own a Slurm job running on this node.
require_job no
CONF
fi
chown root:root "$conf"
chmod 0644 "$conf"

# The pool's sysfs files: group-writable for the helper's group.  sysfs
# forgets this at reboot, so a tmpfiles.d rule re-applies it at boot.
shopt -s nullglob
for f in "$sysroot"/sys/kernel/mm/hugepages/hugepages-*/nr_hugepages \
  "$sysroot"/sys/devices/system/node/node*/hugepages/hugepages-*/nr_hugepages; do
  chgrp "$group" "$f"
  chmod 0664 "$f"
done
if [[ $tmpfiles != none ]]; then
  install -d -m 0755 "$tmpfiles"
  cat >"$tmpfiles/hugepool.conf" <<TMP
# hugepool-reserve: let group $group resize the hugepage pools (setgid helper).
z /sys/kernel/mm/hugepages/hugepages-*/nr_hugepages 0664 root $group -
z /sys/devices/system/node/node*/hugepages/hugepages-*/nr_hugepages 0664 root $group -
d $jobs 0755 root root -
TMP
fi
echo "installed $prefix/bin/hugepool-reserve (setgid $group); config $conf; state $state"

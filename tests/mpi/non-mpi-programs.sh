#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# hugepool-run preloads the MPI entry points into every program; in one
# without MPI they must change nothing: the library needs no MPI library
# (readelf: libc alone; nm: no undefined symbol outside glibc), it is
# mapped in the program (/proc/self/maps), and python3 and sqlite3 give the
# same output, exit status and (empty) stderr as with --mpi off.
#   non-mpi-programs.sh HUGEPOOL_RUN MPI_PRELOAD_LIB
set -uo pipefail
run=$1 lib=$2
fails=0
ok() { echo "PASS $1"; }
ko() { echo "FAIL $1"; fails=$((fails + 1)); }

needed=$(readelf -d "$lib" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
[[ $needed == "libc.so.6 " ]] && ok "needs libc alone: $needed" || ko "DT_NEEDED: $needed"
undefined=$(nm -D --undefined-only "$lib" | awk '$1 == "U" && $2 !~ /@GLIBC_/ { print $2 }' | tr '\n' ' ')
[[ -z $undefined ]] && ok "no undefined symbol outside glibc" || ko "undefined: $undefined"
ldd "$lib" | grep -qi mpi && ko "ldd shows an MPI library: $(ldd "$lib")" || ok "ldd: no MPI library"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/prog.py" <<'PY'
import hashlib, sys
print("mpi entry points mapped:", any("libhugepool_mpi_preload" in l for l in open("/proc/self/maps")), file=sys.stderr)
bufs = [bytearray(m * (1 << 20) + 7) for m in (1, 4, 16)]
for k, b in enumerate(bufs):
    b[::4096] = bytes([k + 1]) * len(b[::4096])
print(hashlib.sha256(b"".join(bufs)).hexdigest())
PY
cat >"$work/prog.sql" <<'SQL'
create table t(x integer, y text);
with recursive n(i) as (select 1 union all select i + 1 from n where i < 50000)
insert into t select i, hex(randomblob(0)) || i from n;
select count(*), sum(x), max(length(y)) from t;
SQL
with_pool() { "$(dirname "$0")/../preload/with-pool" 64 "$@"; }
compare() { # name command...
  local name=$1
  shift
  with_pool "$run" --mpi off -- "$@" >"$work/$name.off" 2>"$work/$name.off.err"
  local rc_off=$?
  with_pool "$run" -- "$@" >"$work/$name.auto" 2>"$work/$name.auto.err"
  local rc_auto=$?
  [[ $rc_off -eq 0 && $rc_auto -eq 0 ]] || { ko "$name: exit status $rc_off / $rc_auto"; return; }
  cmp -s "$work/$name.off" "$work/$name.auto" && ok "$name: same output" || ko "$name: output differs"
}
compare python3 /usr/bin/python3 "$work/prog.py"
grep -qx "mpi entry points mapped: True" "$work/python3.auto.err" && ok "python3: the MPI entry points are loaded" ||
  ko "python3: MPI entry points not in /proc/self/maps: $(cat "$work/python3.auto.err")"
grep -qx "mpi entry points mapped: False" "$work/python3.off.err" && ok "--mpi off: not loaded" ||
  ko "--mpi off: $(cat "$work/python3.off.err")"
[[ $(wc -l <"$work/python3.auto.err") -eq 1 ]] && ok "python3: nothing else on stderr" ||
  ko "python3 stderr: $(cat "$work/python3.auto.err")"
compare sqlite3 sh -c "sqlite3 :memory: <'$work/prog.sql'"
[[ ! -s $work/sqlite3.auto.err ]] && ok "sqlite3: nothing on stderr" || ko "sqlite3 stderr: $(cat "$work/sqlite3.auto.err")"
grep -q '^50000|1250025000|' "$work/sqlite3.auto" && ok "sqlite3: the expected result" || ko "sqlite3: $(cat "$work/sqlite3.auto")"
exit $fails

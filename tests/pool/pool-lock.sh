# SPDX-License-Identifier: BSD-3-Clause
# Sourced by shell tests that hold the pool while they run: the shell face
# of tests/pool/pool-lock `hold`, which takes the machine-wide pool lock
# (saying when and for whom it waits), sets the pool and restores it.
#   pool_hold [N]  take the lock and remember the pool; with N, set it so
#                  that exactly N 2 MB pages are free (fails otherwise)
#   pool_set N     set it again under the same lock (fails unless exactly N)
#   pool_release   restore the pool and let the lock go; call it at exit
#                  (the harness also restores when this shell's end closes
#                  its input, or on SIGTERM)
# The harness runs as a coprocess without LD_PRELOAD, so it never takes
# pool pages itself.
_pool_lock_tool=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/pool-lock
_pool_pid=
_pool_fail() {
  echo "FAIL: $*" >&2
  exit 1
}
_pool_answer() { # word [want]
  local word got
  read -r -u "$_pool_from" word got || _pool_fail "pool-lock hold ended (its message is above)"
  [[ $word == "$1" ]] || _pool_fail "pool-lock hold: $word $got"
  [[ -z ${2:-} || $got == "$2" ]] || _pool_fail "cannot set $2 free huge pages (have $got)"
}
pool_hold() { # [N]
  [[ -z $_pool_pid ]] || _pool_fail "pool_hold: this shell holds the pool already (pool_set changes it)"
  coproc _POOL { exec env -u LD_PRELOAD "$_pool_lock_tool" hold ${1:+--free "$1"}; }
  _pool_pid=$_POOL_PID _pool_from=${_POOL[0]} _pool_to=${_POOL[1]}
  _pool_answer ready "${1:-}"
}
pool_set() { # N
  echo "set $1" >&"$_pool_to"
  _pool_answer ok "$1"
}
pool_release() {
  [[ -n $_pool_pid ]] || return 0
  echo release >&"$_pool_to" 2>/dev/null || true
  wait "$_pool_pid" 2>/dev/null || true
  _pool_pid=
}

# SPDX-License-Identifier: BSD-3-Clause
# What the suites' shell runners share (sourced, not run; common.py is the
# report modules' counterpart).

# bench_lock: holds /tmp/hugepool-bench.lock, on descriptor 8, until the
# runner exits, so that two long benchmark runs do not overlap; waits for a
# run that holds it.  The pool lock (bench/pool-run) is taken inside it, one
# step at a time.
bench_lock() {
  exec 8>>/tmp/hugepool-bench.lock
  flock 8
}

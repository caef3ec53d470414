#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# gpu-smoke.sh BUILD_DIR SOURCE_DIR: the gpu suite (bench/suites/gpu) without a GPU skips
# cleanly: exit 77, one "skip: REASON" line, no pool touched, no target
# line; gpu-torch.py the same without torch or CUDA.  With a CUDA driver and
# device the benchmark's quick run must end with its target lines.
set -u
build=$1 src=$2
out=$(BENCH_BUILD=$build "$src/bench/suites/gpu" gpu --quick 2>&1)
rc=$?
if "$build/bench/hugepool-bench-gpu" probe >/dev/null 2>&1; then
  grep -q '^target: ' <<<"$out" && [[ $rc == 0 ]] && { echo "PASS a GPU run ends with its targets"; exit 0; }
  echo "FAIL the GPU run (exit $rc):"; echo "$out"; exit 1
fi
fails=0
[[ $rc == 77 ]] && echo "PASS exit 77 without a GPU" || { echo "FAIL exit $rc without a GPU"; fails=1; }
[[ $(grep -c '^skip: ' <<<"$out") == 1 ]] && echo "PASS one skip line: $(grep '^skip: ' <<<"$out")" ||
  { echo "FAIL no single skip line in: $out"; fails=1; }
grep -q '^target: ' <<<"$out" && { echo "FAIL targets printed without a GPU"; fails=1; } || echo "PASS no targets without a GPU"
tout=$(/usr/bin/python3 "$src/bench/suites/gpu-torch.py" "$build/preload/hugepool-run" 2>&1)
trc=$?
[[ $trc == 77 ]] && grep -q '^skip: ' <<<"$tout" && echo "PASS gpu-torch.py: $tout" ||
  { echo "FAIL gpu-torch.py without a GPU (exit $trc): $tout"; fails=1; }
exit $fails

#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs the libFuzzer target on the parsers for a bounded time (CI budget).
set -euo pipefail
fuzz=$RESERVE_TOOLS/fuzz_reserve_parse
seconds=${RESERVE_FUZZ_SECONDS:-30}
[[ -x $fuzz ]] || { echo "SKIP: fuzz target not built (clang with libFuzzer missing: apt-get install clang libclang-rt-14-dev)" >&2; exit 77; }
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
cp "$(dirname "$0")"/fuzz-seeds/* "$corpus"/
"$fuzz" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=1024 -max_len=2048 -print_final_stats=1 \
  -artifact_prefix="$corpus/" "$corpus" 2>&1 | tail -n 15
rc=${PIPESTATUS[0]}
ls "$corpus"/crash-* "$corpus"/timeout-* 2>/dev/null && { echo "FAIL: crashing inputs found" >&2; exit 1; }
exit "$rc"

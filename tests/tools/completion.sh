#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The installed bash completion, as a user's TAB meets it: install the build
# into a prefix, source share/bash-completion/completions/NAME for each of the
# four tools with the prefix's bin/ first on PATH, and check what the
# completion function offers for a command line.
#   completion.sh BUILD_DIR
set -uo pipefail
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null || { echo "cmake --install failed"; exit 1; }
export PATH=$tmp/prefix/bin:/usr/bin:/bin
fails=0
dir=$tmp/prefix/share/bash-completion/completions

# What the completion function offers for a command line (an empty last
# word is written as a trailing space), one word a line.
completions() {
  (
    name=${1%% *}
    # shellcheck disable=SC1090
    source "$dir/$name" || exit 1
    read -r -a COMP_WORDS <<<"$1"
    [[ $1 == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    _hugepool_complete
    printf '%s\n' "${COMPREPLY[@]}"
  )
}
# offers "LINE" WORD...: every WORD is offered.
offers() {
  local line=$1 out w missing=()
  shift
  out=$(completions "$line")
  for w in "$@"; do
    grep -qxF -- "$w" <<<"$out" || missing+=("$w")
  done
  if ((${#missing[@]} == 0)); then
    echo "ok   '$line' offers $*"
  else
    echo "FAIL '$line' does not offer ${missing[*]} (offers: $(tr '\n' ' ' <<<"$out"))"
    fails=$((fails + 1))
  fi
}
# refuses "LINE" WORD...: no WORD is offered.
refuses() {
  local line=$1 out w
  shift
  out=$(completions "$line")
  for w in "$@"; do
    if grep -qxF -- "$w" <<<"$out"; then
      echo "FAIL '$line' offers $w"
      fails=$((fails + 1))
      return
    fi
  done
  echo "ok   '$line' offers none of $*"
}

for name in hugepool hugepool-run hugepool-reserve hugepool-stats; do
  [[ -f $dir/$name ]] && echo "ok   installed $dir/$name" || { echo "FAIL no $dir/$name"; fails=$((fails + 1)); }
done
offers "hugepool " doctor stats
offers "hugepool doctor --n" --need
offers "hugepool doctor --" --json --need --ranks --root --help
offers "hugepool-run --pol" --policy
offers "hugepool-run --policy " strict thp small fallback
offers "hugepool-run --small" --small-heap
offers "hugepool-run --fork " copy keep
offers "hugepool-run --stats=j" --stats=json
offers "hugepool-run --page-size " 2M 1G
offers "hugepool-run -- hugepool-ru" hugepool-run
offers "hugepool-run --policy thp hugepool-st" hugepool-stats
refuses "hugepool-run -- sort --pol" --policy
offers "hugepool-reserve --st" --status
offers "hugepool-reserve --size " 2M 1G
offers "hugepool-stats --" --json --png --all
# Every option a tool's --help lists is offered.
for name in hugepool-run hugepool-reserve hugepool-stats; do
  mapfile -t opts < <("$name" --help 2>&1 | grep -oE '(^|[ [|])--[a-z][-a-z]*' | tr -d ' [|' | sort -u)
  ((${#opts[@]})) && offers "$name --" "${opts[@]}"
done
((fails == 0)) && echo "completion: all checks passed" || { echo "completion: $fails failed"; exit 1; }

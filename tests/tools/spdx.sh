#!/usr/bin/env bash
# Every source file names its licence: an `SPDX-License-Identifier:` line in
# its first 5 lines (C and C++ sources and headers, *.in templates, CMake
# files, Python, Fortran, and every script with a shebang).  Lists the files
# without one.
#   spdx.sh SOURCE_DIR
set -euo pipefail
src=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t all < <(git ls-files --cached --others --exclude-standard)
else
  mapfile -t all < <(find . -path ./.git -prune -o -path './build*' -prune -o -type f -print | sed 's|^\./||')
fi
missing=()
checked=0
for f in "${all[@]}"; do
  [[ -f $f ]] || continue
  case $f in
    # Formats that allow no comment line: a Debian changelog, and the
    # machine-readable copyright file, which names the licence itself.
    packaging/debian/changelog.in | packaging/debian/copyright.in) continue ;;
    *.c | *.h | *.cpp | *.hpp | *.in | *.cmake | CMakeLists.txt | */CMakeLists.txt | *.py | *.f90 | *.F90) ;;
    *) head -c 2 "$f" 2>/dev/null | grep -q '^#!' || continue ;;
  esac
  checked=$((checked + 1))
  head -n 5 "$f" | grep -q 'SPDX-License-Identifier:' || missing+=("$f")
done
if ((${#missing[@]})); then
  printf 'no SPDX-License-Identifier line in the first 5 lines: %s\n' "${missing[@]}"
  echo "${#missing[@]} of $checked source files lack one"
  exit 1
fi
echo "all $checked source files carry an SPDX-License-Identifier line"

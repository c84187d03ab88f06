#!/usr/bin/env bash
# scripts/check-format.sh [--fix]: lists every tracked C++ file that differs from .clang-format
# (clang-format 14) and exits 1 if there is one; with --fix, formats them in place instead.
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-clang-format-14}
command -v "$CLANG_FORMAT" > /dev/null || CLANG_FORMAT=clang-format

mapfile -t files < <(git ls-files '*.h' '*.cc' '*.cpp' '*.hpp')
if [[ ${1:-} == --fix ]]; then
  "$CLANG_FORMAT" -i --style=file "${files[@]}"
  exit 0
fi

differ=()
for f in "${files[@]}"; do
  if ! "$CLANG_FORMAT" --style=file --dry-run -Werror "$f" > /dev/null 2>&1; then
    differ+=("$f")
  fi
done
if ((${#differ[@]} > 0)); then
  printf '%s\n' "${differ[@]}"
  echo "check-format: ${#differ[@]} of ${#files[@]} files differ from .clang-format;" \
       "scripts/check-format.sh --fix formats them" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"

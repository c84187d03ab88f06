#!/usr/bin/env bash
# scripts/run-clang-tidy.sh BUILD_DIR [JOBS] [FILE_REGEX]: runs clang-tidy 16 (.clang-tidy) over
# the project's .cc files in BUILD_DIR/compile_commands.json (generated protobuf code is under
# build/ and left out), and over the project's headers they include. Exits non-zero on any finding.
# BUILD_DIR must have been built (or at least have its protobuf headers generated): CI uses
# build/tsan, the clang build.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?usage: run-clang-tidy.sh BUILD_DIR [JOBS] [FILE_REGEX]}
JOBS=${2:-2}
ROOT=$PWD
DIRS='(runtime|operators|protocol|sinks|sources|tools|persist|ingest|async|base|tests|bench|examples)'
FILES=${3:-"^$ROOT/$DIRS/.*\\.cc\$"}
RUN=$(command -v run-clang-tidy-16)
TIDY=$(command -v clang-tidy-16)
# -quiet: only findings. The header filter keeps generated headers (under build/) and system
# headers out.
PYTHONUNBUFFERED=1 "$RUN" -quiet -clang-tidy-binary "$TIDY" -p "$BUILD" -j "$JOBS" -header-filter="^$ROOT/$DIRS/" "$FILES" > "$BUILD/clang-tidy.log" 2>&1 \
  && status=0 || status=$?
grep -E '(warning|error):' "$BUILD/clang-tidy.log" | sort -u || true
if ((status != 0)); then
  echo "clang-tidy: findings above (full log: $BUILD/clang-tidy.log)" >&2
  exit 1
fi
echo "clang-tidy: clean"

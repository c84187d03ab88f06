#!/usr/bin/env bash
# sources/fuzz/binlog/run.sh [SECONDS] [LIBFUZZER_FLAGS...]: builds binlog_fuzz with clang in
# build/fuzz-binlog (libFuzzer + AddressSanitizer + UndefinedBehaviorSanitizer; a standalone
# build of this folder: four files) and fuzzes it for SECONDS (default 60).
#
# First every input in regressions/ (inputs that once found a defect, see regressions/README.md)
# is replayed on its own; then the fuzzer starts from seeds/ (events captured from MariaDB 10.11
# by tests/sources/mysql_binlog_test.cc), regressions/ and what earlier runs found, which accumulates
# in build/fuzz-binlog/corpus. A crash leaves its input in build/fuzz-binlog/artifacts/ and
# makes this script fail; replay it with
#   build/fuzz-binlog/binlog_fuzz build/fuzz-binlog/artifacts/crash-...
# An input that runs longer than 30 s counts as a hang (a finding, like a crash).
# Needs clang 16 and libclang-rt-16-dev. CXX chooses another clang (16 or later); JOBS caps the
# build's parallelism (default: ninja's).
set -euo pipefail
cd "$(dirname "$0")/../../.."
SECONDS_TO_RUN=${1:-60}
shift || true
export CXX=${CXX:-clang++-16}
HERE=sources/fuzz/binlog
BUILD=build/fuzz-binlog

# A build directory configured with another compiler is configured again; the corpus stays.
if [[ -f $BUILD/CMakeCache.txt ]] &&
  ! grep -qx "CMAKE_CXX_COMPILER:[A-Z]*=$(command -v "$CXX")" "$BUILD/CMakeCache.txt"; then
  rm -rf "$BUILD/CMakeCache.txt" "$BUILD/CMakeFiles" "$BUILD/build.ninja"
fi
if [[ ! -f $BUILD/build.ninja ]]; then
  cmake -S "$HERE" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$BUILD" ${JOBS:+-j "$JOBS"} --target binlog_fuzz

mkdir -p "$BUILD/corpus" "$BUILD/artifacts"
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
mapfile -t regressions < <(find "$HERE/regressions" -type f ! -name README.md | sort)
if ((${#regressions[@]} > 0)); then
  echo "binlog_fuzz: replaying ${#regressions[@]} regression inputs"
  "$BUILD/binlog_fuzz" "${regressions[@]}"
fi
"$BUILD/binlog_fuzz" "$BUILD/corpus" "$HERE/seeds" "$HERE/regressions" \
  -max_total_time="$SECONDS_TO_RUN" -timeout=30 -artifact_prefix="$BUILD/artifacts/" \
  -print_final_stats=1 "$@"

#!/usr/bin/env bash
# sources/fuzz/pgoutput/run.sh [SECONDS] [LIBFUZZER_FLAGS...]: builds pgoutput_fuzz with clang in
# build/fuzz-pgoutput (libFuzzer + AddressSanitizer + UndefinedBehaviorSanitizer; a standalone
# build of this folder: two files) and fuzzes it for SECONDS (default 60).
#
# First every input in regressions/ (inputs that once found a defect, see regressions/README.md)
# is replayed on its own; then the fuzzer starts from seeds/ (messages captured from PostgreSQL 15
# by tests/sources/pgoutput_test.cc), regressions/ and what earlier runs found, which accumulates
# in build/fuzz-pgoutput/corpus. A crash leaves its input in build/fuzz-pgoutput/artifacts/ and
# makes this script fail; replay it with
#   build/fuzz-pgoutput/pgoutput_fuzz build/fuzz-pgoutput/artifacts/crash-...
# An input that runs longer than 30 s counts as a hang (a finding, like a crash).
# Needs clang 16 and libclang-rt-16-dev. CXX chooses another clang (16 or later); JOBS caps the
# build's parallelism (default: ninja's).
set -euo pipefail
cd "$(dirname "$0")/../../.."
SECONDS_TO_RUN=${1:-60}
shift || true
export CXX=${CXX:-clang++-16}
HERE=sources/fuzz/pgoutput
BUILD=build/fuzz-pgoutput

# A build directory configured with another compiler is configured again; the corpus stays.
if [[ -f $BUILD/CMakeCache.txt ]] &&
  ! grep -qx "CMAKE_CXX_COMPILER:[A-Z]*=$(command -v "$CXX")" "$BUILD/CMakeCache.txt"; then
  rm -rf "$BUILD/CMakeCache.txt" "$BUILD/CMakeFiles" "$BUILD/build.ninja"
fi
if [[ ! -f $BUILD/build.ninja ]]; then
  cmake -S "$HERE" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$BUILD" ${JOBS:+-j "$JOBS"} --target pgoutput_fuzz

mkdir -p "$BUILD/corpus" "$BUILD/artifacts"
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
mapfile -t regressions < <(find "$HERE/regressions" -type f ! -name README.md | sort)
if ((${#regressions[@]} > 0)); then
  echo "pgoutput_fuzz: replaying ${#regressions[@]} regression inputs"
  "$BUILD/pgoutput_fuzz" "${regressions[@]}"
fi
"$BUILD/pgoutput_fuzz" "$BUILD/corpus" "$HERE/seeds" "$HERE/regressions" \
  -max_total_time="$SECONDS_TO_RUN" -timeout=30 -artifact_prefix="$BUILD/artifacts/" \
  -print_final_stats=1 "$@"

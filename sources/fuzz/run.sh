#!/usr/bin/env bash
# sources/fuzz/run.sh [SECONDS] [LIBFUZZER_FLAGS...]: builds value_fuzz with clang in
# build/fuzz-sources (libFuzzer + AddressSanitizer + UndefinedBehaviorSanitizer; sources/fuzz is
# configured as a project of its own, so nothing else is built) and fuzzes it for SECONDS
# (default 60). FUZZ_TARGET picks the target; there is one:
#   value_fuzz (default)  the PostgreSQL text and binary (COPY BINARY) decoders, print_value/
#                         print_row, RelationDesc::decode and parse_copy_text_line (value_fuzz.cc,
#                         input format in value_fuzz.h)
#
# Seeds (written by <target>_seeds with the encoder) are rewritten into
# build/fuzz-sources/<target>-run/seeds on every run; what the fuzzer finds accumulates in
# build/fuzz-sources/<target>-run/corpus. Inputs that once found a defect
# (sources/fuzz/regressions/<target>/) are replayed first. A crash leaves its input in
# build/fuzz-sources/<target>-run/artifacts/ and makes this script fail; replay it with
#   build/fuzz-sources/<target> build/fuzz-sources/<target>-run/artifacts/crash-...
# An input that runs longer than 30 s counts as a hang. Needs clang 16 and libclang-rt-16-dev.
# CC and CXX choose another clang (16 or later); JOBS caps the build's parallelism.
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_TO_RUN=${1:-60}
shift || true
TARGET=${FUZZ_TARGET:-value_fuzz}
export CC=${CC:-clang-16} CXX=${CXX:-clang++-16}

BUILD=build/fuzz-sources
if [[ -f $BUILD/CMakeCache.txt ]] &&
  ! grep -qx "CMAKE_CXX_COMPILER:[A-Z]*=$(command -v "$CXX")" "$BUILD/CMakeCache.txt"; then
  rm -rf "$BUILD/CMakeCache.txt" "$BUILD/CMakeFiles" "$BUILD/build.ninja"
fi
if [[ ! -f $BUILD/build.ninja ]]; then
  cmake -S sources/fuzz -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$BUILD" ${JOBS:+-j "$JOBS"} --target "$TARGET" "${TARGET}_seeds"

OUT=$BUILD/$TARGET-run
mkdir -p "$OUT/corpus" "$OUT/artifacts"
rm -rf "$OUT/seeds"
"$BUILD/${TARGET}_seeds" "$OUT/seeds"
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
regressions=()
if [[ -d sources/fuzz/regressions/$TARGET ]] &&
  [[ -n $(ls -A "sources/fuzz/regressions/$TARGET") ]]; then
  regressions=("sources/fuzz/regressions/$TARGET")
fi
"$BUILD/$TARGET" "$OUT/corpus" "$OUT/seeds" "${regressions[@]}" \
  -max_total_time="$SECONDS_TO_RUN" -timeout=30 -artifact_prefix="$OUT/artifacts/" \
  -print_final_stats=1 "$@"

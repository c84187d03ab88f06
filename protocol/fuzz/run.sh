#!/usr/bin/env bash
# protocol/fuzz/run.sh [SECONDS] [LIBFUZZER_FLAGS...]: builds a fuzz target with clang in
# build/fuzz (libFuzzer + AddressSanitizer + UndefinedBehaviorSanitizer; tests, benchmarks and
# examples off) and fuzzes it for SECONDS (default 60). FUZZ_TARGET picks the target:
#   frame_fuzz (default)  frame decoding and the runtime's payload decoders (frame_fuzz.cc)
#   part_fuzz             persist's part decoder, decode_part (part_fuzz.cc)
#
# Seeds (valid inputs from the encoders, written by <target>_seeds) are rewritten into
# build/fuzz/<target>/seeds on every run; what the fuzzer finds accumulates in
# build/fuzz/<target>/corpus. A crash leaves its input in build/fuzz/<target>/artifacts/ and makes
# this script fail; replay it with
#   build/fuzz/protocol/fuzz/<target> build/fuzz/<target>/artifacts/crash-...
# An input that runs longer than 30 s counts as a hang (a finding, like a crash).
# Needs clang 16 and libclang-rt-16-dev (scripts/setup.sh installs both): frame_fuzz compiles
# weir_runtime, which clang 14 cannot. CC and CXX choose another clang (16 or later); JOBS caps
# the build's parallelism (default: ninja's).
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_TO_RUN=${1:-60}
shift || true
TARGET=${FUZZ_TARGET:-frame_fuzz}
export CC=${CC:-clang-16} CXX=${CXX:-clang++-16}

BUILD=build/fuzz
# A build directory configured with another compiler (clang 14, before) is configured again; the
# corpora under it stay.
if [[ -f $BUILD/CMakeCache.txt ]] &&
  ! grep -qx "CMAKE_CXX_COMPILER:[A-Z]*=$(command -v "$CXX")" "$BUILD/CMakeCache.txt"; then
  rm -rf "$BUILD/CMakeCache.txt" "$BUILD/CMakeFiles" "$BUILD/build.ninja"
fi
if [[ ! -f $BUILD/build.ninja ]]; then
  cmake -S . -B "$BUILD" -G Ninja -DWEIR_FUZZ=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DWEIR_BUILD_TESTS=OFF -DWEIR_BUILD_BENCH=OFF -DWEIR_BUILD_EXAMPLES=OFF
fi
cmake --build "$BUILD" ${JOBS:+-j "$JOBS"} --target "$TARGET" "${TARGET}_seeds"

OUT=$BUILD/$TARGET
mkdir -p "$OUT/corpus" "$OUT/artifacts"
"$BUILD/protocol/fuzz/${TARGET}_seeds" "$OUT/seeds"
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# Inputs that once found a defect (protocol/fuzz/regressions/README.md) are replayed first.
regressions=()
[[ -d protocol/fuzz/regressions/$TARGET ]] && regressions=("protocol/fuzz/regressions/$TARGET")
"$BUILD/protocol/fuzz/$TARGET" "$OUT/corpus" "$OUT/seeds" "${regressions[@]}" \
  -max_total_time="$SECONDS_TO_RUN" -timeout=30 -artifact_prefix="$OUT/artifacts/" \
  -print_final_stats=1 "$@"

#!/usr/bin/env bash
# protocol/fuzz/run.sh [SECONDS] [LIBFUZZER_FLAGS...]: builds frame_fuzz with clang in build/fuzz
# (libFuzzer + AddressSanitizer + UndefinedBehaviorSanitizer; tests, benchmarks and examples
# off) and fuzzes frame decoding for SECONDS (default 60).
#
# Seeds (valid frames from frame.cc's encoder) are rewritten into build/fuzz/frame_fuzz/seeds on
# every run; what the fuzzer finds accumulates in build/fuzz/frame_fuzz/corpus. A crash leaves
# its input in build/fuzz/frame_fuzz/artifacts/ and makes this script fail; replay it with
#   build/fuzz/protocol/fuzz/frame_fuzz build/fuzz/frame_fuzz/artifacts/crash-...
# Needs clang and libclang-rt-14-dev (scripts/setup.sh installs both).
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_TO_RUN=${1:-60}
shift || true

BUILD=build/fuzz
if [[ ! -f $BUILD/build.ninja ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DWEIR_FUZZ=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DWEIR_BUILD_TESTS=OFF -DWEIR_BUILD_BENCH=OFF -DWEIR_BUILD_EXAMPLES=OFF
fi
cmake --build "$BUILD" --target frame_fuzz frame_fuzz_seeds

OUT=$BUILD/frame_fuzz
mkdir -p "$OUT/corpus" "$OUT/artifacts"
"$BUILD"/protocol/fuzz/frame_fuzz_seeds "$OUT/seeds"
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
"$BUILD"/protocol/fuzz/frame_fuzz "$OUT/corpus" "$OUT/seeds" \
  -max_total_time="$SECONDS_TO_RUN" -artifact_prefix="$OUT/artifacts/" -print_final_stats=1 "$@"

#!/usr/bin/env bash
# protocol/fuzz/coverage.sh [--source] [FILE...]: how much of FILE (default: the runtime and
# protocol files frame_fuzz is for) a fuzz target's corpus reaches: build/fuzz/<target>/corpus
# and seeds, each input run once, no new ones made. Run protocol/fuzz/run.sh first: it builds the
# target and fills the corpus. FUZZ_TARGET picks the target, as in run.sh.
#
# By default, from libFuzzer's -print_coverage=1 on the fuzzing build: per file, the functions
# reached (of those compiled out of line into the target: what the optimizer inlined counts in its
# caller) and the edges covered, then one line per function, by source line: every instantiation
# of a template at that line counts as one function, reached if any instantiation is. "edges" are
# libFuzzer's counters (the sanitizers' checks included), so edge percentages read low.
#
# --source: clang's source-based coverage instead (llvm-cov report: regions, functions and lines
# per file, inlined code included). Builds the target once more, without sanitizers, in
# build/fuzz-cov (a few minutes); needs llvm-profdata-16 and llvm-cov-16 (package llvm-16).
set -euo pipefail
cd "$(dirname "$0")/../.."
TARGET=${FUZZ_TARGET:-frame_fuzz}
BUILD=build/fuzz
OUT=$BUILD/$TARGET
SOURCE=0
if [[ ${1:-} == --source ]]; then
  SOURCE=1
  shift
fi
if (($# == 0)); then
  set -- runtime/include/weir/dataflow/scope.h runtime/include/weir/dataflow/nested.h \
    protocol/src/frame.cc runtime/include/weir/communication/codec.h \
    runtime/src/communication/allocator.cc runtime/include/weir/dataflow/pact.h \
    runtime/include/weir/progress/reachability.h
fi
[[ -x $BUILD/protocol/fuzz/$TARGET && -d $OUT/corpus ]] ||
  { echo "coverage.sh: no $TARGET build or corpus: run protocol/fuzz/run.sh first" >&2; exit 2; }

if ((SOURCE)); then
  COV=build/fuzz-cov
  if [[ ! -f $COV/build.ninja ]]; then
    CC=${CC:-clang-16} CXX=${CXX:-clang++-16} cmake -S . -B "$COV" -G Ninja -DWEIR_FUZZ=ON \
      -DWEIR_FUZZ_COVERAGE=ON -DCMAKE_BUILD_TYPE=Debug \
      -DWEIR_BUILD_TESTS=OFF -DWEIR_BUILD_BENCH=OFF -DWEIR_BUILD_EXAMPLES=OFF >/dev/null
  fi
  cmake --build "$COV" ${JOBS:+-j "$JOBS"} --target "$TARGET"
  rm -f "$COV/$TARGET.profraw"
  LLVM_PROFILE_FILE=$COV/$TARGET.profraw "$COV/protocol/fuzz/$TARGET" "$OUT/corpus" "$OUT/seeds" \
    -runs=0 >"$COV/$TARGET.log" 2>&1 || { tail -20 "$COV/$TARGET.log" >&2; exit 1; }
  llvm-profdata-16 merge -sparse -o "$COV/$TARGET.profdata" "$COV/$TARGET.profraw"
  llvm-cov-16 report "$COV/protocol/fuzz/$TARGET" -instr-profile="$COV/$TARGET.profdata" "$@"
  exit 0
fi

# -print_coverage names functions through the symbolizer.
SYMBOLIZER=$(command -v llvm-symbolizer-16 || command -v llvm-symbolizer-14 ||
  command -v llvm-symbolizer)
REPORT=$(mktemp)
trap 'rm -f "$REPORT"' EXIT
ASAN_SYMBOLIZER_PATH=$SYMBOLIZER "$BUILD/protocol/fuzz/$TARGET" "$OUT/corpus" "$OUT/seeds" \
  -runs=0 -print_coverage=1 >"$REPORT" 2>&1 ||
  { tail -20 "$REPORT" >&2; exit 1; }

python3 - "$REPORT" "$@" <<'EOF'
import re
import sys

report, files = sys.argv[1], sys.argv[2:]
line_re = re.compile(r"^(UN)?COVERED_FUNC: hits: (\d+) edges: (\d+)/(\d+) (.*) (\S+):(\d+)$")
# (file, line) -> [name, instantiations, reached instantiations, edges covered, edges]
funcs = {}
for text in open(report, errors="replace"):
    m = line_re.match(text.rstrip("\n"))
    if not m:
        continue
    path, line = m.group(6), int(m.group(7))
    if line == 0:
        continue  # Thunks and compiler-made functions.
    f = funcs.setdefault((path, line), [m.group(5), 0, 0, 0, 0])
    f[1] += 1
    f[2] += m.group(1) is None
    f[3] += int(m.group(3))
    f[4] += int(m.group(4))


def short(name):
    name = name.replace(
        "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >",
        "std::string")
    name = re.sub(r"\bunsigned long\b", "u64", name)
    # Drop the parameter list (the last top-level parentheses).
    depth, cut = 0, len(name)
    for i in range(len(name) - 1, -1, -1):
        c = name[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                cut = i
                break
    name = name[:cut] if cut > 0 else name
    return name if len(name) <= 110 else name[:107] + "..."


for suffix in files:
    rows = sorted((k, v) for k, v in funcs.items() if k[0].endswith(suffix))
    if not rows:
        print(f"{suffix}: no functions compiled into the target\n")
        continue
    reached = sum(1 for _, v in rows if v[2] > 0)
    covered = sum(v[3] for _, v in rows)
    edges = sum(v[4] for _, v in rows)
    print(f"{suffix}: {reached}/{len(rows)} functions reached, "
          f"{covered}/{edges} edges ({100 * covered / max(edges, 1):.0f}%)")
    for (path, line), (name, n, hit, c, e) in rows:
        mark = "reached    " if hit else "NOT reached"
        inst = f" [{hit}/{n} instantiations]" if n > 1 else ""
        print(f"  {mark} :{line:<4} {short(name)}{inst} edges {c}/{e}")
    print()
EOF

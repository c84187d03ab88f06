#!/usr/bin/env bash
# Checks that a program linking only weir::runtime and weir::operators (examples/consumer, built
# against the installed package) does not link Boost.Context (weir::async's) or oneTBB
# nor gRPC or protobuf (weir::protocol, weir::persist).
# Usage: scripts/check-consumer-deps.sh [BINARY]   (default: build/consumer/consumer)
set -euo pipefail
cd "$(dirname "$0")/.."

binary=${1:-build/consumer/consumer}
[[ -x "$binary" ]] || { echo "check-consumer-deps: no executable at $binary" >&2; exit 1; }

libs=$(ldd "$binary")
if found=$(grep -E 'libboost_context|libtbb|libgrpc|libgpr|libprotobuf' <<<"$libs"); then
  echo "check-consumer-deps: $binary links what only weir::async may bring:" >&2
  echo "$found" >&2
  exit 1
fi
echo "check-consumer-deps: $binary links none of Boost.Context, oneTBB, gRPC, protobuf"

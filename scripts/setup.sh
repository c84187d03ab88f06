#!/usr/bin/env bash
# Installs every Debian 12 package weir needs to build, test and benchmark.
# Idempotent: re-running it installs nothing new once everything is present.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkgconf git clang libclang-rt-14-dev
  clang-16 libclang-rt-16-dev llvm-16 clang-tidy-16 clang-format-14
  libboost-context-dev libprotobuf-dev protobuf-compiler libgrpc++-dev
  protobuf-compiler-grpc libabsl-dev libfmt-dev libspdlog-dev libcli11-dev libzstd-dev
  libsqlite3-dev libpq-dev libssl-dev libgtest-dev libgmock-dev libbenchmark-dev
  postgresql-15 postgresql-client-15 mariadb-server mariadb-client libmariadb-dev
  libdeflate-dev openssl python3
  prometheus-cpp-dev libcivetweb-dev nlohmann-json3-dev chromium
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  SUDO="sudo"
fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# Installs the Debian packages dsv4 builds against, then configures and builds it.
# Usage: scripts/setup.sh [build-dir]   (DSV4_CUDA=OFF for a CPU-only build)
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(cmake ninja-build g++ clang libclang-rt-14-dev
          nlohmann-json3-dev libcli11-dev libcpp-httplib-dev libboost1.74-dev
          libopenblas-openmp-dev
          libgtest-dev libgmock-dev libbenchmark-dev
          python3)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
build=${1:-build}
cuda=${DSV4_CUDA:-ON}
[ -x /usr/local/cuda/bin/nvcc ] || cuda=OFF
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDSV4_CUDA="$cuda" \
      -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc ${DSV4_CMAKE_ARGS:-}
cmake --build "$build" -j "$(nproc)"

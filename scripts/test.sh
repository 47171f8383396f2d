#!/usr/bin/env bash
# Builds (through setup.sh, which installs what is missing) and runs the CPU test suite.
# Usage: scripts/test.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
scripts/setup.sh "$build"
ctest --test-dir "$build" -L unit --output-on-failure -j "$(nproc)"

#!/usr/bin/env bash
# One device-machine call for structured outputs (issue 37): the decode step with and without a
# JSON Schema on the embedded Brown model on the GPU, at B = 1 and 32 (or BATCHES) - every free
# run of `dsv4 bench` followed by one held to bench/grammar/order_schema.json (nested objects,
# arrays of objects, enums, formats, a pattern, anyOf, recursive $ref), its masks made on the
# engine's helper thread during each forward as for the server's requests. Build and pack first
# (scripts/device/pack.sh), then run this with carry ["build/carry"]:
#   scripts/device/schema_bench.sh [BATCHES]      BATCHES default 1,32
set -uo pipefail
batches=${1:-1,32}
out=${OUT:-/tmp/dsv4_out}
mkdir -p "$out"
bins=$(mktemp -d)
tar xJf build/carry/bins.tar.xz -C "$bins"
export DSV4_SOURCE_DIR=$PWD OMP_WAIT_POLICY=passive DSV4_MODEL=
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
timeout 300 "$bins/dsv4" bench --device cuda --model tests/golden/brown_small/model \
  --json-schema bench/grammar/order_schema.json --batch "$batches" --prompt-tokens 64 \
  --gen-tokens 128 --repeats 5 2>&1 | tee "$out/schema.txt"

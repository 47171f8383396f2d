#!/usr/bin/env bash
# One device-machine call for speculative decoding (issue 34): the verify step against a plain
# step at V4-Flash shapes - a synthetic checkpoint of two V4-Flash layers, a CSA (ratio 4) and
# an HCA (128) one, score-routed, and the MTP block (random weights keep no draft, so a step
# emits one token and bench splits it into verify and drafting) - then the trained Brown
# model's tokens a second, plain and speculative, at each batch size. With a `dsv4_before` in
# the carried binaries (DSV4_BEFORE=... scripts/device/pack.sh), that binary beside it. Build
# and pack first, then run this with carry ["build/carry"]:
#   [CUDA_GRAPH=on|off] scripts/device/speculative_bench.sh [BATCHES]   BATCHES default 1,8,32
# Every run names CUDA_GRAPH (default on): dsv4's auto would put graphs on beside an older
# dsv4_before that steps op by op.
set -uo pipefail
batches=${1:-1,8,32}
graph=(--cuda-graph "${CUDA_GRAPH:-on}")
out=${OUT:-/tmp/dsv4_out}
mkdir -p "$out"
bins=$(mktemp -d)
tar xJf build/carry/bins.tar.xz -C "$bins"
export DSV4_SOURCE_DIR=$PWD OMP_WAIT_POLICY=passive
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
config=$(mktemp --suffix=.json)
python3 - tests/checkpoint/fixtures/v4_flash_config.json "$config" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(num_hidden_layers=2, compress_ratios=[4, 128, 0], num_hash_layers=0)
json.dump(c, open(sys.argv[2], "w"), indent=2)
PY
model=/tmp/dsv4_synth_speculative
rm -rf "$model"
timeout 120 "$bins/synth_checkpoint" "$config" "$model" --layers 2 --mtp-layers 1 | tail -1
builds=dsv4
[ -x "$bins/dsv4_before" ] && builds="dsv4_before dsv4"
# bench MODEL K GEN BUILD LOG: every batch size. A build before --batch lists and
# --speculate-always (5234520 and older) takes one size a run and always speculates.
bench() {
  local sizes=$batches always=--speculate-always
  if [ "$4" = dsv4_before ]; then sizes=${batches//,/ }; always=; fi
  for b in $sizes; do
    timeout 120 "$bins/$4" bench --device cuda --model "$1" --batch "$b" "${graph[@]}" --prompt-tokens 64 \
      --gen-tokens "$3" --repeats 2 $( [ "$2" -gt 0 ] && echo --speculative "$2" $always ) 2>&1 |
      grep -E "^dsv4 bench|decode step|speculative|error" | tee -a "$5"
  done
}
for build in $builds; do
  for k in 0 1 2 3; do
    echo "== V4-Flash shapes, $build, K=$k" | tee -a "$out/v4.txt"
    bench "$model" $k 16 $build "$out/v4.txt"
  done
done
rm -rf "$model" "$config"
# The Brown model as a user meets it: this build speculates where it pays (no --speculate-always).
for build in $builds; do
  for k in 0 1 2; do
    echo "== Brown, $build, K=$k" | tee -a "$out/brown.txt"
    if [ $build = dsv4 ]; then
      timeout 60 "$bins/dsv4" bench --device cuda --model tests/golden/brown_small/model \
        --batch "$batches" "${graph[@]}" --prompt-tokens 64 --gen-tokens 128 --repeats 3 \
        $( [ $k -gt 0 ] && echo --speculative $k ) 2>&1 |
        grep -E "^dsv4 bench|decode step|speculative|error" | tee -a "$out/brown.txt"
    else
      bench tests/golden/brown_small/model $k 128 $build "$out/brown.txt"
    fi
  done
done

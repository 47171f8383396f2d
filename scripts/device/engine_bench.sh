#!/usr/bin/env bash
# One device-machine call: the engine end to end at a real model's layer shapes. Writes a
# synthetic checkpoint of the config's first LAYERS layers (bench/checkpoint/synth_checkpoint),
# times `dsv4 bench --device cuda` on it at each batch size (and, when the carried binaries hold
# a `dsv4_before`, that binary beside it, interleaved: a same-call A/B), then puts one short run
# per batch size under ncu (NCU_PROMPT_TOKENS a prompt, default 256, so the decode steps run at a
# real position) and summarises where its first prefill step's and its last decode step's kernel
# time goes (ncu_step_summary.py). Logs to $OUT. Build and pack first (scripts/device/pack.sh), then run this
# with carry ["build/carry"]:
#   scripts/device/engine_bench.sh [CONFIG] [LAYERS] [BATCHES]
#     CONFIG   default tests/checkpoint/fixtures/v4_flash_config.json
#     LAYERS   default 4 (V4-Flash: two sliding-window hash-routed layers, a CSA and an HCA one)
#     BATCHES  comma separated, default 1,8
set -uo pipefail
config=${1:-tests/checkpoint/fixtures/v4_flash_config.json}
layers=${2:-4}
batches=${3:-1,8}
out=${OUT:-/tmp/dsv4_out}
mkdir -p "$out"
bins=$(mktemp -d)
tar xJf build/carry/bins.tar.xz -C "$bins"
export DSV4_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
model=/tmp/dsv4_synth_${layers}
[ -d "$model" ] || timeout 120 "$bins/synth_checkpoint" "$config" "$model" --layers "$layers" | tail -1
builds=dsv4
[ -x "$bins/dsv4_before" ] && builds="dsv4_before dsv4"
for batch in ${batches//,/ }; do
  for build in $builds; do
    echo "== $build, batch $batch" | tee -a "$out/engine.txt"
    timeout 120 "$bins/$build" bench --device cuda --model "$model" --batch "$batch" \
      --prompt-tokens 256 --gen-tokens 32 --repeats 3 2>&1 |
      grep -E "time to first|decode step" | tee -a "$out/engine.txt"
  done
done
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
[ -x "$ncu" ] || exit 0
for batch in ${batches//,/ }; do
  timeout 200 "$ncu" --csv --page raw --metrics gpu__time_duration.sum \
    "$bins/dsv4" bench --device cuda --model "$model" --batch "$batch" \
    --prompt-tokens "${NCU_PROMPT_TOKENS:-256}" --gen-tokens 3 --repeats 1 > "$out/ncu_b$batch.csv" 2>&1
  for step in 0 -1; do
    python3 scripts/device/ncu_step_summary.py "$out/ncu_b$batch.csv" 25 "$step" |
      tee -a "$out/ncu_b$batch.txt"
  done
  xz -9 "$out/ncu_b$batch.csv"
done

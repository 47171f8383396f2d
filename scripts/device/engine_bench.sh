#!/usr/bin/env bash
# One device-machine call: the engine end to end at a real model's layer shapes. For each depth,
# writes a synthetic checkpoint of the config's first LAYERS layers (bench/checkpoint/
# synth_checkpoint), times `dsv4 bench --device cuda` on it at each batch size (and, when the
# carried binaries hold a `dsv4_before`, that binary beside it, interleaved: a same-call A/B),
# then puts one short run per batch size in NCU_BATCHES and binary under ncu (NCU_PROMPT_TOKENS
# a prompt, default 256, so the decode steps run at a real position) and summarises where its
# first prefill step's and its last decode step's kernel time goes (ncu_step_summary.py).
# Finally engine_table.py fits each binary's and batch's step time over the depths (ms a layer,
# intercept, V4-Flash's 43 layers extrapolated) beside each layer's memory floor (the bytes
# scripts/step_bytes.py counts, at the copy rate bench/read_ceiling measures once at the start
# of the call) and the slope's ratio to it, the time to first token, the kernels a step and the
# GPU's busy share: issue 30's whole-model table. Logs to $OUT. Build and pack first
# (scripts/device/pack.sh), then run this with carry ["build/carry"]:
#   scripts/device/engine_bench.sh [CONFIG] [DEPTHS] [BATCHES]
#     CONFIG   default tests/checkpoint/fixtures/v4_flash_config.json
#     DEPTHS   comma separated layer counts, default 4 (V4-Flash: two sliding-window
#              hash-routed layers, a CSA and an HCA one); two or more give the per-layer fit
#     BATCHES  comma separated, default 1,8
#   NCU_BATCHES (default: the first batch size; empty: no ncu), NCU_DEPTHS (default: all)
#   VARIANTS     what runs beside each other, ';'-separated NAME:BINARY:FLAGS (flags spaced),
#                e.g. 'exact:dsv4:--numerics exact;fast:dsv4:--numerics fast --cuda-graph on';
#                default: dsv4_before (when carried) and dsv4, both --numerics exact
#   SYNTH_FLAGS    synth_checkpoint's extra flags: --fp8-linears writes the linears the release
#                  stores in FP8 so (issue 31's decode bytes); default bf16
#   PROMPT_TOKENS  each sequence's prompt (default 256: the decode steps run at a real position)
set -uo pipefail
config=${1:-tests/checkpoint/fixtures/v4_flash_config.json}
depths=${2:-4}
batches=${3:-1,8}
ncu_batches=${NCU_BATCHES-${batches%%,*}}
ncu_depths=${NCU_DEPTHS-$depths}
out=${OUT:-/tmp/dsv4_out}
mkdir -p "$out"
bins=$(mktemp -d)
tar xJf build/carry/bins.tar.xz -C "$bins"
export DSV4_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
cp "$config" "$out/config.json"
# The copy rate the floors divide by, on this GPU in this call (one 64 MB read row besides).
timeout 120 "$bins/read_ceiling" 64 | tee "$out/read_ceiling.txt"
# The profile named: dsv4's default on cuda (fast since 09fc949) is not an older binary's.
variants=${VARIANTS:-$( [ -x "$bins/dsv4_before" ] && echo "dsv4_before:dsv4_before:--numerics exact;")dsv4:dsv4:--numerics exact}
IFS=';' read -ra variants <<< "$variants"
ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for layers in ${depths//,/ }; do
  model=/tmp/dsv4_synth_${layers}
  rm -rf /tmp/dsv4_synth_*  # one depth's checkpoint at a time: V4-Flash's is ~4 GB a layer
  # shellcheck disable=SC2086  # SYNTH_FLAGS: none, or e.g. --fp8-linears (as the release stores them)
  timeout 300 "$bins/synth_checkpoint" "$config" "$model" --layers "$layers" ${SYNTH_FLAGS:-} | tail -1
  python3 scripts/step_bytes.py --linears-of "$model" > "$out/linears_l${layers}.txt"
  for batch in ${batches//,/ }; do
    for variant in "${variants[@]}"; do
      IFS=':' read -r name build flags <<< "$variant"
      echo "== $name, layers $layers, batch $batch" | tee -a "$out/engine.txt"
      # shellcheck disable=SC2086
      timeout 120 "$bins/$build" bench --device cuda --model "$model" --batch "$batch" $flags \
        --prompt-tokens "${PROMPT_TOKENS:-256}" --gen-tokens 32 --repeats 3 2>&1 |
        grep -E "time to first|decode step" | tee -a "$out/engine.txt"
    done
  done
  [ -x "$ncu" ] && [[ ",$ncu_depths," == *",$layers,"* ]] || continue
  for batch in ${ncu_batches//,/ }; do
    for variant in "${variants[@]}"; do
      IFS=':' read -r name build flags <<< "$variant"
      run=ncu_${name}_l${layers}_b${batch}
      # shellcheck disable=SC2086
      timeout 200 "$ncu" --clock-control none --csv --page raw \
        --metrics gpu__time_duration.sum "$bins/$build" bench --device cuda --model "$model" $flags \
        --batch "$batch" --prompt-tokens "${NCU_PROMPT_TOKENS:-256}" --gen-tokens 3 \
        --repeats 1 > "$out/$run.csv" 2>&1
      for step in 0 -1; do
        python3 scripts/device/ncu_step_summary.py "$out/$run.csv" 25 "$step" | tee -a "$out/$run.txt"
      done
      xz -9 "$out/$run.csv"
    done
  done
done
# The decode steps run at positions prompt .. prompt + 31: their mean is prompt + 16.
python3 scripts/device/engine_table.py "$out" --context $((${PROMPT_TOKENS:-256} + 16)) |
  tee "$out/table.md"

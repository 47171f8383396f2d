#!/usr/bin/env bash
# One device-machine call: the engine end to end at a real model's layer shapes. For each depth,
# writes a synthetic checkpoint of the config's first LAYERS layers (bench/checkpoint/
# synth_checkpoint), times `dsv4 bench --device cuda` on it at each batch size (and, when the
# carried binaries hold a `dsv4_before`, that binary beside it, interleaved: a same-call A/B),
# then puts one short run per batch size in NCU_BATCHES and binary under ncu (prompts of
# NCU_PROMPT_TOKENS, by default PROMPT_TOKENS, so the decode steps run at a real position) and
# summarises where its first prefill step's and its last decode step's kernel time goes
# (ncu_step_summary.py).
# Finally engine_table.py fits each binary's and batch's step time over the depths (ms a layer,
# intercept, V4-Flash's 43 layers extrapolated) beside each layer's memory floor (the bytes
# scripts/step_bytes.py counts, at the copy rate bench/read_ceiling measures once at the start
# of the call) and the slope's ratio to it, the time to first token, the kernels a step and the
# GPU's busy share: issue 30's whole-model table. With a prefill to measure (PREFILL=1, or
# prompts of 1024 tokens or more) the call also runs bench/gemm_rates once (the bf16, FP8 and f32
# dense GEMM rates), puts the whole prefill under ncu instead of its first step, and the table
# adds issue 31's prefill: the time to first token fitted over the depths (ms a layer), its
# compute floor at those rates (scripts/step_flops.py, per op), the ratio, tokens/s extrapolated
# to the config's layers, each variant's speed-up over the first, and ncu's time per group of
# kernels against the floors of the ops they run. Logs to $OUT. Build and pack first
# (scripts/device/pack.sh), then run this with carry ["build/carry"]:
#   scripts/device/engine_bench.sh [CONFIG] [DEPTHS] [BATCHES]
#     CONFIG   default tests/checkpoint/fixtures/v4_flash_config.json
#     DEPTHS   comma separated layer counts, default 4 (V4-Flash: two sliding-window
#              hash-routed layers, a CSA and an HCA one); two or more give the per-layer fit
#     BATCHES  comma separated, default 1,8
#   NCU_BATCHES (default: the first batch size; empty: no ncu), NCU_DEPTHS (default: all),
#   NCU_VARIANTS (comma separated names of VARIANTS; default: all)
#   VARIANTS     what runs beside each other, ';'-separated NAME:BINARY:FLAGS (flags spaced),
#                e.g. 'exact:dsv4:--numerics exact;fast:dsv4:--numerics fast --cuda-graph on',
#                or the step size, 'step2k:dsv4:--numerics fast --max-step-tokens 2048;
#                step16k:dsv4:--numerics fast --max-step-tokens 16384' (docs/usage.md);
#                default: dsv4_before (when carried) and dsv4, both --numerics exact
#                --cuda-graph off
#   SYNTH_FLAGS    synth_checkpoint's extra flags: --fp8-linears writes the linears the release
#                  stores in FP8 so (issue 31's decode bytes); default bf16
#   PROMPT_TOKENS  each sequence's prompt (default 256: the decode steps run at a real position)
#   GEN_TOKENS     tokens each sequence generates (default 32; the decode steps run at positions
#                  PROMPT_TOKENS .. PROMPT_TOKENS + GEN_TOKENS - 1)
#   PREFILL        1: measure the prefill as above; 0: never; default: when PROMPT_TOKENS ≥ 1024
#   NCU_TIMEOUT    seconds an ncu run may take (default 200; a long prefill under ncu needs more)
#   NCU_PROMPT_TOKENS  the ncu runs' prompt (default PROMPT_TOKENS); NCU_DEPTHS defaults to the
#                  last depth when measuring the prefill (a long prefill under ncu is slow)
set -uo pipefail
config=${1:-tests/checkpoint/fixtures/v4_flash_config.json}
depths=${2:-4}
batches=${3:-1,8}
prompt_tokens=${PROMPT_TOKENS:-256}
gen_tokens=${GEN_TOKENS:-32}
prefill=${PREFILL:-$((prompt_tokens >= 1024))}
ncu_batches=${NCU_BATCHES-${batches%%,*}}
ncu_depths=${NCU_DEPTHS-$( [ "$prefill" = 1 ] && echo "${depths##*,}" || echo "$depths")}
ncu_prompt_tokens=${NCU_PROMPT_TOKENS:-$prompt_tokens}
ncu_gen_tokens=3  # a prefill and two decode steps a run; the bench runs a warm-up and 1 repeat
out=${OUT:-/tmp/dsv4_out}
mkdir -p "$out"
bins=$(mktemp -d)
tar xJf build/carry/bins.tar.xz -C "$bins"
export DSV4_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
cp "$config" "$out/config.json"
# The copy rate the floors divide by, on this GPU in this call (one 64 MB read row besides).
timeout 120 "$bins/read_ceiling" 64 | tee "$out/read_ceiling.txt"
# The rates the prefill's compute floor divides by, on this GPU in this call.
[ "$prefill" = 1 ] && timeout 120 "$bins/gemm_rates" | tee "$out/gemm_rates.txt"
# The profile and the graphs named: dsv4's defaults on cuda (fast since 09fc949, graphs since
# c9276e4) are not an older binary's. Graphs off: a planned engine runs two steps a bucket at
# open, which ncu would count among the bench's steps.
eager="--numerics exact --cuda-graph off"
variants=${VARIANTS:-$( [ -x "$bins/dsv4_before" ] && echo "dsv4_before:dsv4_before:$eager;")dsv4:dsv4:$eager}
IFS=';' read -ra variants <<< "$variants"
for variant in "${variants[@]}"; do  # name, binary, flags: engine_table.py reads the profile
  IFS=':' read -r name build flags <<< "$variant"
  printf '%s\t%s\t%s\n' "$name" "$build" "$flags"
done > "$out/variants.txt"
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
        --prompt-tokens "$prompt_tokens" --gen-tokens "$gen_tokens" --repeats 3 2>&1 |
        grep -E "time to first|decode step" | tee -a "$out/engine.txt"
    done
  done
  [ -x "$ncu" ] && [[ ",$ncu_depths," == *",$layers,"* ]] || continue
  for batch in ${ncu_batches//,/ }; do
    for variant in "${variants[@]}"; do
      IFS=':' read -r name build flags <<< "$variant"
      [[ ",${NCU_VARIANTS:-$name}," == *",$name,"* ]] || continue
      run=ncu_${name}_l${layers}_b${batch}
      # shellcheck disable=SC2086
      timeout "${NCU_TIMEOUT:-200}" "$ncu" --clock-control none --csv --page raw \
        --metrics gpu__time_duration.sum "$bins/$build" bench --device cuda --model "$model" $flags \
        --batch "$batch" --prompt-tokens "$ncu_prompt_tokens" --gen-tokens "$ncu_gen_tokens" \
        --repeats 1 > "$out/$run.csv" 2>&1
      for step in 0 -1; do
        python3 scripts/device/ncu_step_summary.py "$out/$run.csv" 25 "$step" | tee -a "$out/$run.txt"
      done
      [ "$prefill" = 1 ] && python3 scripts/device/ncu_step_summary.py "$out/$run.csv" 40 prefill \
        --runs 2 --gen-tokens "$ncu_gen_tokens" | tee "$out/${run}_prefill.txt"
      xz -9 "$out/$run.csv"
    done
  done
done
# The decode steps run at positions prompt .. prompt + gen - 1: their mean is about prompt + gen/2.
python3 scripts/device/engine_table.py "$out" --context $((prompt_tokens + gen_tokens / 2)) \
  --prompt-tokens "$prompt_tokens" | tee "$out/table.md"

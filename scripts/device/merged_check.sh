#!/usr/bin/env bash
# One device-machine call that checks merged code, most important first, within ~8 minutes:
# every CUDA op, model and runtime test (the engine, expert-parallel ranks on the one GPU), the
# trained model's perplexity in both numerics profiles (as shipped and with the release's FP8
# linears), `dsv4 verify` on every golden model with 1 to 4 ranks (their outputs' bytes
# compared), the decode step with and without a JSON Schema, the MoE routing and FFN, FP8 linear
# and producer, and norm kernels, then the decode graph's tests with every new device buffer
# poisoned (CONTRIBUTING.md) and with launches serialised. Logs to $OUT/logs.tar.gz. Build, then
# `scripts/device/pack.sh` and run this with carry ["build/carry"].
set -uo pipefail
export OMP_WAIT_POLICY=passive DSV4_MODEL=
out=${OUT:-/tmp/dsv4_out}
logs=$out/logs
mkdir -p "$logs"
# Its output also goes to $OUT: a call stopped at its limit returns no piped output.
exec > >(tee "$out/summary.txt") 2>&1
bins=$(mktemp -d)
tar xJf build/carry/bins.tar.xz -C "$bins"
export DSV4_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/device.txt"
start=$(date +%s)
# name, seconds, VAR=value for its environment, binary, gtest filter, extra gtest flags
run_tests() {
  local s
  s=$(date +%s)
  # shellcheck disable=SC2086  # $6: no flag, or one
  timeout "$2" env "$3" "$bins/$4" --gtest_brief=1 --gtest_filter="$5" ${6:-} > "$logs/$1.log" 2>&1
  echo "== $1 rc=$? $(( $(date +%s) - s ))s: $(grep -E '^\[  PASSED  \]' "$logs/$1.log")"
  grep -E "^\[  FAILED  \]|Failure|Which is|Expected|actual|tiny_a prompt|step [0-9]+ of|differ|layer [0-9]+" \
    "$logs/$1.log" | head -30
  save_logs
}
# The device call brings back few files: the logs travel as one archive, refreshed after each
# stage so that a call stopped at its limit still returns what ran.
save_logs() { tar czf "$out/logs.tar.gz" -C "$out" logs; }
run_tests ops 40 X=1 kernels_ops_cuda_tests '*'
run_tests model 90 X=1 model_cuda_tests '*'
run_tests runtime 60 X=1 runtime_cuda_tests '*'
b=tests/golden/brown_small
python3 scripts/fp8_linears.py $b/model "$bins/brown_fp8" > /dev/null
for m in $b/model "$bins/brown_fp8"; do
  for n in exact fast; do
    echo "== eval $(basename "$m") $n: $(timeout 30 "$bins/dsv4" eval --device cuda --numerics $n \
      --model "$m" --text $b/heldout_excerpt.txt 2>&1 | tail -1)"
  done
done
echo "== verify --ep 1..4 on every golden model: $(timeout 75 scripts/ep_verify_ranks.sh \
  "$bins/dsv4" cuda "$bins/ep_verify" > "$logs/ep_verify.txt" 2>&1; tail -n 1 "$logs/ep_verify.txt")"
echo "== decode step with and without a schema"
timeout 90 "$bins/dsv4" bench --device cuda --model $b/model --json-schema \
  bench/grammar/order_schema.json --batch 1,32 --prompt-tokens 64 --gen-tokens 128 --repeats 5 \
  2>&1 | tee "$logs/schema.txt" | grep -vE "^prefix|^dsv4 bench" | tail -24
save_logs
run_tests kernels 260 X=1 kernels_cuda_tests '*MoeFfnCuda*:*MoeRoute*:*Fp8*:*RmsNorm*:*HyperConnection*'
echo "elapsed $(( $(date +%s) - start ))s"
run_tests poisoned_graphs 60 DSV4_POISON_DEVICE_MEMORY=1 model_cuda_tests 'Golden/DecodeGraphCudaTest.*'
# Serialised launches: a pass here and a failure above is a host/device ordering race.
run_tests graphs_blocking 40 CUDA_LAUNCH_BLOCKING=1 model_cuda_tests \
  'Golden/DecodeGraphCudaTest.ReplayedStepsOfUpToEight*/0'
echo "elapsed $(( $(date +%s) - start ))s"
save_logs && rm -rf "$logs"

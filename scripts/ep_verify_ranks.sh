#!/usr/bin/env bash
# `dsv4 verify` on every golden model with 1, 2, 3 and 4 expert-parallel ranks: each rank
# count's outputs (--dump: every prompt's logits and the greedy continuation's tokens and logits)
# and report must be the same bytes as one rank's (docs/ep.md §7). Expert parallelism shards
# NVFP4 experts, so the golden models with bf16 experts are first quantized (`dsv4 quantize`,
# a static input scale); brown_small ships NVFP4 experts with calibrated scales. Against the
# oracle the W4A4 outputs are off by the quantization (verify says FAIL, exit 1): what is
# compared here is the ranks with one rank, not the oracle. tiny_d_state_dict is left out: its
# experts' intermediate size (40) is no multiple of NVFP4's 16-value block. On cuda only
# brown_small runs: the CUDA MoE needs widths in multiples of 128 (as every V4 checkpoint has),
# and the tiny models' are 32-128.
#   usage: scripts/ep_verify_ranks.sh DSV4_BINARY DEVICE WORK_DIR     DEVICE: cpu or cuda
# Prints one line a model and rank count; a model stops at its first difference or error, the
# others still run, and the script then exits 1.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
dsv4=$1 device=$2 work=$3
golden=tests/golden
mkdir -p "$work"
models=("brown_small $golden/brown_small/model $golden/brown_small/reference_w4a16.safetensors")
tiny=(tiny_a_pretrained tiny_b_state_dict tiny_c_pretrained tiny_e_pretrained)
[ "$device" = cuda ] && tiny=()
for folder in "${tiny[@]}"; do
  # Any fixed input scale serves: the ranks must give one rank's bits whatever it is.
  "$dsv4" quantize "$golden/$folder/model" "$work/$folder" --input-scale 0.05 --force \
    > "$work/$folder.quantize.log" 2>&1 ||
    { cat "$work/$folder.quantize.log"; echo "FAIL: quantize $folder"; exit 1; }
  models+=("$folder $work/$folder $golden/$folder/reference.safetensors")
done
# One model's ranks against its one rank; returns 1 at its first difference or error.
check_model() {
  local name=$1 model=$2 reference=$3 ranks out rc verdict
  for ranks in 1 2 3 4; do
    out=$work/$name.ep$ranks
    "$dsv4" verify --device "$device" --experts w4a4 --ep "$ranks" --model "$model" \
      --reference "$reference" --dump "$out.safetensors" --force > "$out.txt" 2>&1
    rc=$?
    # 0 PASS, 1 FAIL against the oracle: both wrote their outputs; anything else is an error.
    if [ "$rc" -gt 1 ]; then
      tail -n 3 "$out.txt"
      echo "FAIL: $name with $ranks ranks: verify exited $rc"
      return 1
    fi
    verdict="one rank's outputs"
    if [ "$ranks" -gt 1 ]; then
      if ! cmp -s "$work/$name.ep1.safetensors" "$out.safetensors" ||
         ! cmp -s "$work/$name.ep1.txt" "$out.txt"; then
        diff "$work/$name.ep1.txt" "$out.txt"
        echo "FAIL: $name with $ranks ranks: outputs differ from one rank's"
        return 1
      fi
      verdict="the same bytes as one rank's"
    fi
    echo "$name, --ep $ranks on $device: $(stat -c %s "$out.safetensors") bytes of outputs," \
         "$verdict ($(tail -n 1 "$out.txt" | sed 's/.*: //') against the oracle)"
  done
}

failed=0
for entry in "${models[@]}"; do
  # shellcheck disable=SC2086  # the entry's three words are the arguments
  check_model $entry || failed=$((failed + 1))
done
if [ "$failed" -gt 0 ]; then
  echo "$failed of ${#models[@]} golden models: ranks differ from one rank, or failed"
  exit 1
fi
echo "every golden model: 2, 3 and 4 ranks give one rank's bits"

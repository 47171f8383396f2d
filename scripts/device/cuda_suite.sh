#!/usr/bin/env bash
# One device-machine call: the CUDA test binaries, then the MoE benchmark (and, when carried,
# the PyTorch baseline and the NVFP4 GEMM benchmark), logs to $OUT. The binaries are built on
# the CPU machine and carried compressed, since the tree travels under 64 MiB:
#   scripts/device/pack.sh            (writes build/carry/bins.tar.xz and copies the baseline)
# then run this with carry ["build/carry"]:
#   scripts/device/cuda_suite.sh TESTS MOE_ARGS [GEMM_M]
#     TESTS     gtest filter for the cuda test binaries ('*' for all, '-' for none)
#     MOE_ARGS  moe_bench arguments in one word, colons for spaces ('-' for none), e.g.
#               --tokens:1,8:--modes:w4a16
#     GEMM_M    M list for nvfp4_gemm_bench (absent: not run)
# Environment: MOE_ENV_B, if set, runs moe_bench a second time with that VAR=value (an A/B of
# an environment-gated variant in the same call); TORCH_TOKENS, if set, the PyTorch baseline's
# token list; LINEAR_T, if set, runs linear_bench with that token list; FP8_M, if set,
# fp8_gemm_bench with that M list (the FP8 linears and the grouped wo_a); SMALL_OPS_T, if set,
# decode_small_ops_bench (a decode layer's mHC ops and norms) with that row list; FAST_ATTENTION,
# if set, fast_attention_bench, after fast_attention_bench_before where pack.sh put one in (the
# same call's baseline). decode_bench (the loader's host decode) and sampler_bench (a greedy
# draw's host time) run last. After the tests,
# `dsv4 bench --device cuda` on the tree's tiny checkpoint (the
# engine's own overheads end to end: its layers are too small to weigh anything) at batch 1 and 8,
# and the trained model's perplexity in both numerics profiles.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
out=${OUT:-/tmp/dsv4_out}
tests=${1:--}
moe_args=${2:--}
gemm_m=${3:-}
mkdir -p "$out"
bins=$(mktemp -d)
tar xJf build/carry/bins.tar.xz -C "$bins"
export DSV4_SOURCE_DIR=$PWD
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv \
  > "$out/device.txt" 2>&1
git log -1 --format='%H %s' >> "$out/device.txt" 2>/dev/null
# Registers, stack and spills of the MoE expert kernels.
cuobjdump --dump-resource-usage "$bins/moe_bench" 2>/dev/null | grep -A1 "expert_stream" |
  grep -oE "REG:[0-9]+ STACK:[0-9]+ SHARED:[0-9]+ LOCAL:[0-9]+" | sort | uniq -c >> "$out/device.txt"
cat "$out/device.txt"
cublas=$(find /opt /usr /root -name 'libcublas.so.13' 2>/dev/null | head -1)
[ -n "$cublas" ] && export LD_LIBRARY_PATH="$(dirname "$cublas")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

rc=0
if [ "$tests" != "-" ]; then
  for t in "$bins"/*_tests; do
    name=$(basename "$t")
    timeout 240 "$t" --gtest_filter="$tests" --gtest_brief=1 > "$out/$name.log" 2>&1
    r=$?
    echo "$name rc=$r: $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]' "$out/$name.log" | head -3 | tr '\n' ' ')"
    [ $r -ne 0 ] && rc=$r && grep -E 'FAILED|Failure|error' "$out/$name.log" | head -20
  done
fi
if [ -x "$bins/dsv4" ] && [ $rc -eq 0 ]; then
  for batch in 1 8; do
    timeout 120 "$bins/dsv4" bench --device cuda --model tests/golden/tiny_a_pretrained/model \
      --batch "$batch" --prompt-tokens 128 --gen-tokens 32 2>&1 | tee -a "$out/dsv4_bench.txt"
  done
fi
# The trained model's perplexity in both numerics profiles, as shipped and with the release's FP8
# linears (docs/quality.md, "The numerics profiles").
if [ -x "$bins/dsv4" ]; then
  python3 scripts/fp8_linears.py tests/golden/brown_small/model "$bins/brown_fp8" > /dev/null
  for m in tests/golden/brown_small/model "$bins/brown_fp8"; do
    for n in exact fast; do
      echo "== eval $m --numerics $n"
      timeout 60 "$bins/dsv4" eval --device cuda --numerics "$n" --model "$m" \
        --text tests/golden/brown_small/heldout_excerpt.txt 2>&1 | tail -1
    done
  done | tee "$out/eval.txt"
fi
if [ "$moe_args" != "-" ] && [ $rc -eq 0 ]; then
  # shellcheck disable=SC2086
  timeout 300 "$bins/moe_bench" ${moe_args//:/ } 2>&1 | tee "$out/moe_bench.md"
  if [ -n "${MOE_ENV_B:-}" ]; then
    echo "== again with $MOE_ENV_B"
    # shellcheck disable=SC2086
    env "$MOE_ENV_B" timeout 300 "$bins/moe_bench" ${moe_args//:/ } 2>&1 | tee "$out/moe_bench_b.md"
  fi
fi
if [ -n "${TORCH_TOKENS:-}" ] && [ -f build/carry/torch_moe_baseline.py ]; then
  for shape in flash pro; do
    PYTHONUNBUFFERED=1 timeout 240 python3 build/carry/torch_moe_baseline.py --shape "$shape" \
      --tokens "$TORCH_TOKENS" 2>&1 | tee -a "$out/torch_baseline.txt"
  done
fi
if [ -n "$gemm_m" ] && [ $rc -eq 0 ]; then
  timeout 300 "$bins/nvfp4_gemm_bench" "$out/gemm_bench.md" "$gemm_m" 2>&1 | tail -5
  cat "$out/gemm_bench.md" 2>/dev/null | head -60
fi
if [ -n "${LINEAR_T:-}" ] && [ $rc -eq 0 ]; then
  timeout 300 "$bins/linear_bench" "$out/linear_bench.md" "$LINEAR_T" 2>&1 | tail -5
  cat "$out/linear_bench.md" 2>/dev/null
fi
if [ -n "${FP8_M:-}" ] && [ $rc -eq 0 ]; then
  timeout 300 "$bins/fp8_gemm_bench" "$out/fp8_gemm_bench.md" "$FP8_M" 2>&1 | tail -5
  cat "$out/fp8_gemm_bench.md" 2>/dev/null
fi
if [ -n "${SMALL_OPS_T:-}" ] && [ $rc -eq 0 ]; then
  timeout 120 "$bins/decode_small_ops_bench" "$SMALL_OPS_T" 2>&1 |
    tee "$out/decode_small_ops_bench.md"
fi
if [ -n "${FAST_ATTENTION:-}" ] && [ $rc -eq 0 ]; then
  for b in fast_attention_bench_before fast_attention_bench; do
    [ -x "$bins/$b" ] || continue
    echo "== $b" | tee -a "$out/fast_attention_bench.md"
    timeout 300 "$bins/$b" 2>&1 | tee -a "$out/fast_attention_bench.md"
  done
fi
# The loader's host decode and a greedy draw's host time on the machine's cores (no GPU; a few
# seconds each).
[ -x "$bins/decode_bench" ] && timeout 120 "$bins/decode_bench" 2>&1 | tee "$out/decode_bench.md"
[ -x "$bins/sampler_bench" ] && timeout 60 "$bins/sampler_bench" 2>&1 | tee "$out/sampler_bench.md"
if [ -x build/carry/extra.sh ]; then BINS=$bins build/carry/extra.sh "$out"; fi
exit $rc

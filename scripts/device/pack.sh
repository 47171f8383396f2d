#!/usr/bin/env bash
# Packs what scripts/device/cuda_suite.sh runs on the device machine into build/carry (ignored):
# the stripped CUDA test binaries and benchmarks of the build directory, compressed, and the
# shared PyTorch MoE baseline (../shared does not travel with the tree). With DSV4_BEFORE set to
# another build's dsv4 binary, that one goes in as dsv4_before (engine_bench.sh's same-call A/B),
# and with FAST_ATTENTION_BEFORE another build's fast_attention_bench as
# fast_attention_bench_before (cuda_suite.sh's FAST_ATTENTION A/B); DSV4_EXTRA, space-separated
# NAME=PATH pairs, more builds' binaries under those names (a third variant of engine_bench.sh's
# VARIANTS). PACK_ONLY, a space-separated
# list of binary names, packs those alone: the device call carries the tree and build/carry
# together, at most 64 MiB, and the tree alone is ~42 MiB.
#   usage: [DSV4_BEFORE=path] [FAST_ATTENTION_BEFORE=path] [DSV4_EXTRA="name=path ..."] [PACK_ONLY="dsv4 model_cuda_tests ..."]
#          scripts/device/pack.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
stage=$(mktemp -d)
for b in tests/kernels/kernels_cuda_tests tests/kernels/kernels_ops_cuda_tests \
         tests/model/model_cuda_tests tests/checkpoint/checkpoint_device_tests \
         tests/runtime/runtime_cuda_tests \
         bench/moe_bench bench/nvfp4_gemm_bench bench/linear_bench bench/weight_stream_probe \
         bench/decode_bench bench/read_ceiling bench/gemm_rates bench/synth_checkpoint dsv4 \
         bench/decode_small_ops_bench bench/fast_attention_bench bench/fp8_gemm_bench \
         tests/kernels/ep/ep_cuda_tests bench/ep_moe_bench bench/sampler_bench; do
  [ -n "${PACK_ONLY:-}" ] && [[ " $PACK_ONLY " != *" $(basename "$b") "* ]] && continue
  [ -x "$build/$b" ] && strip -o "$stage/$(basename "$b")" "$build/$b"
done
[ -n "${DSV4_BEFORE:-}" ] && strip -o "$stage/dsv4_before" "$DSV4_BEFORE"
[ -n "${FAST_ATTENTION_BEFORE:-}" ] &&
  strip -o "$stage/fast_attention_bench_before" "$FAST_ATTENTION_BEFORE"
for extra in ${DSV4_EXTRA:-}; do strip -o "$stage/${extra%%=*}" "${extra#*=}"; done
mkdir -p "$build/carry"
tar cf - -C "$stage" . | xz -9 -T2 > "$build/carry/bins.tar.xz"  # -9: the binaries share most bytes
rm -rf "$stage"
[ -f ../shared/bench/torch_moe_baseline.py ] && cp ../shared/bench/torch_moe_baseline.py "$build/carry/"
ls -la "$build/carry"
# What the device call will carry: the tracked and untracked-not-ignored files, and build/carry.
tree_bytes=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
carry_bytes=$(du -sb "$build/carry" | cut -f1)
if (( tree_bytes + carry_bytes > 64 << 20 )); then
  echo "pack.sh: the tree ($(( tree_bytes >> 20 )) MiB) and build/carry ($(( carry_bytes >> 20 )) MiB) pass the device call's 64 MiB: pack fewer binaries (PACK_ONLY)" >&2
  exit 1
fi

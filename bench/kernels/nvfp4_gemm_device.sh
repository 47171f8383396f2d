#!/usr/bin/env bash
# One device-machine call for the NVFP4 GEMM: SASS summary, the cuda tests, the benchmark.
# Binaries are built here and carried compressed (the tree travels under 64 MiB):
#   strip -o DIR/kernels_cuda_tests build-gemm/tests/kernels/kernels_cuda_tests (same for
#   bench/nvfp4_gemm_bench); tar cJf build-gemm/carry/gemm_bins.tar.xz -C DIR .
# then run this with carry ["build-gemm/carry"]. Logs go to $OUT.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/nvfp4_gemm_out}
mkdir -p "$out"
bins=$(mktemp -d)
tar xJf build-gemm/carry/gemm_bins.tar.xz -C "$bins"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv \
  > "$out/device.txt" 2>&1

# Per kernel: wgmma (HGMMA), mma.sync (HMMA) and local-memory (LDL/STL) instruction counts.
cuobjdump --dump-sass "$bins/nvfp4_gemm_bench" 2>/dev/null | awk '
  /Function :/ { if (f != "") printf "%s HGMMA=%d HMMA=%d LDL/STL=%d\n", f, g, h, l;
                 f = $3; g = h = l = 0 }
  /HGMMA/ { g++ } /HMMA/ { h++ } /LDL|STL/ { l++ }
  END { if (f != "") printf "%s HGMMA=%d HMMA=%d LDL/STL=%d\n", f, g, h, l }' |
  grep -i "nvfp4\|small_m" > "$out/sass.txt"
cat "$out/sass.txt"

cublas=$(find /opt /usr /root -name 'libcublas.so.13' 2>/dev/null | head -1)
[ -n "$cublas" ] && export LD_LIBRARY_PATH="$(dirname "$cublas")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

timeout 120 "$bins/kernels_cuda_tests" --gtest_filter='*Nvfp4*' 2>&1 | tee "$out/tests.log" | tail -25
if [ "${PIPESTATUS[0]}" -ne 0 ]; then
  timeout 60 compute-sanitizer --tool memcheck "$bins/kernels_cuda_tests" \
    --gtest_filter='Shapes/Nvfp4GemmCudaTest.MatchesTheCpu/0:Shapes/Nvfp4GemmCudaTest.MatchesTheCpu/6:Shapes/Nvfp4GemmCudaTest.MatchesTheCpu/9' \
    > "$out/sanitizer.log" 2>&1
  tail -30 "$out/sanitizer.log"
fi
timeout 200 "$bins/nvfp4_gemm_bench" "$out/bench.md" 2>&1 | tee "$out/bench.log"

#!/usr/bin/env bash
# One device-machine call for the NVFP4 GEMM: SASS summary, the cuda tests (on failure:
# compute-sanitizer on three cases, and no benchmark), the benchmark, then Nsight Compute on one
# launch of the large-M kernel. Binaries are built here and carried compressed (the tree travels
# under 64 MiB):
#   strip -o DIR/gemm_cuda_tests build-gemm/tests/kernels/<the cuda test binary>;
#   strip -o DIR/nvfp4_gemm_bench build-gemm/bench/nvfp4_gemm_bench;
#   tar cJf build-gemm/carry/gemm_bins.tar.xz -C DIR .
# then run this with carry ["build-gemm/carry"]. Logs go to $OUT.
#   usage: nvfp4_gemm_device.sh [M list for the benchmark, e.g. 4096,16384] [ncu M, 0: none]
set -uo pipefail
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1
out=${OUT:-/tmp/nvfp4_gemm_out}
ms=${1:-1,8,64,512,4096,16384}
ncu_m=${2:-4096}
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

timeout 90 "$bins/gemm_cuda_tests" --gtest_filter='*Nvfp4*' 2>&1 | tee "$out/tests.log" | tail -25
if [ "${PIPESTATUS[0]}" -ne 0 ]; then
  failing=$(grep -o '^\[  FAILED  \] Shapes/[^ ,]*' "$out/tests.log" | head -1 | awk '{print $4}')
  timeout 60 compute-sanitizer --tool memcheck "$bins/gemm_cuda_tests" \
    --gtest_filter="${failing:-Shapes/Nvfp4GemmCudaTest.MatchesTheCpu/9}" \
    > "$out/sanitizer.log" 2>&1
  tail -30 "$out/sanitizer.log"
  exit 1
fi
timeout 200 "$bins/nvfp4_gemm_bench" "$out/bench.md" "$ms" 2>&1 | tee "$out/bench.log"
if [ "$ncu_m" != 0 ]; then
  timeout 100 ncu --clock-control none --kernel-name regex:nvfp4_ws --launch-skip 1 \
    --launch-count 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section InstructionStats --section Occupancy --section MemoryWorkloadAnalysis \
    "$bins/nvfp4_gemm_bench" /tmp/ncu_bench.md "$ncu_m" "Pro gate" > "$out/ncu.txt" 2>&1
  grep -v "^==PROF==" "$out/ncu.txt" | tail -80
fi

#!/usr/bin/env bash
# One device-machine call for the NVFP4 GEMM: SASS summary, the cuda tests (on failure:
# compute-sanitizer on the first failing case, and no benchmark), the benchmark, then Nsight
# Compute with source-level stall sampling on four launches of the large-M kernel (source_top.txt:
# the most stalled SASS instructions; source.csv.xz and ws.ncu-rep.xz in full). Binaries are
# built here and carried compressed (the tree travels under 64 MiB):
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
ncu --version >> "$out/device.txt" 2>&1

# Per kernel: wgmma (HGMMA), mma.sync (HMMA), local-memory (LDL/STL), thread-index reads (S2R
# of SR_TID) and generic loads (LD.E, which a shared-memory read becomes when the compiler loses
# its address space) instruction counts.
cuobjdump --dump-sass "$bins/nvfp4_gemm_bench" 2>/dev/null | awk '
  function show() { printf "%s HGMMA=%d HMMA=%d LDL/STL=%d S2R_TID=%d LD.E=%d\n", f, g, h, l, t, e }
  /Function :/ { if (f != "") show(); f = $3; g = h = l = t = e = 0 }
  /HGMMA/ { g++ } /HMMA/ { h++ } /LDL|STL/ { l++ } /S2R.*SR_TID/ { t++ } / LD\.E/ { e++ }
  END { if (f != "") show() }' |
  grep -i "nvfp4\|small_m" >> "$out/device.txt"
cat "$out/device.txt"

cublas=$(find /opt /usr /root -name 'libcublas.so.13' 2>/dev/null | head -1)
[ -n "$cublas" ] && export LD_LIBRARY_PATH="$(dirname "$cublas")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

timeout 90 "$bins/gemm_cuda_tests" --gtest_filter='*Nvfp4*' 2>&1 | tee "$out/tests.log" | tail -25
tests_rc=${PIPESTATUS[0]}
if [ "$tests_rc" -ne 0 ]; then
  failing=$(grep -o '^\[  FAILED  \] Shapes/[^ ,]*' "$out/tests.log" | head -1 | awk '{print $4}')
  timeout 60 compute-sanitizer --tool memcheck "$bins/gemm_cuda_tests" \
    --gtest_filter="${failing:-Shapes/Nvfp4GemmCudaTest.MatchesTheCpu/9}" \
    >> "$out/tests.log" 2>&1
  tail -30 "$out/tests.log"
else
  timeout 300 "$bins/nvfp4_gemm_bench" "$out/bench.md" "$ms" 2>&1 | tail -3
fi
# Nsight Compute, with source-level (SASS) stall sampling, on the warp-specialised launches of
# one Pro gate_up shape: the bench's profile mode runs each variant once, so launches 1..4 are
# the W4A16 op, the W4A4 op, 128-token tiles and token tiles by cp.async (bench file comment).
if [ "$ncu_m" != 0 ]; then
  DSV4_BENCH_PROFILE=1 timeout 240 ncu --clock-control none --kernel-name regex:nvfp4_ws \
    --launch-skip 1 --launch-count 4 --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis \
    --section SourceCounters -f -o /tmp/ws "$bins/nvfp4_gemm_bench" /tmp/ncu_bench.md "$ncu_m" \
    "Pro gate" > "$out/ncu.txt" 2>&1
  ncu --import /tmp/ws.ncu-rep >> "$out/ncu.txt" 2>&1
  ncu --import /tmp/ws.ncu-rep --page source --print-source sass --csv > /tmp/source.csv \
    2>> "$out/ncu.txt" ||
    ncu --import /tmp/ws.ncu-rep --page source --csv > /tmp/source.csv 2>> "$out/ncu.txt"
  python3 scripts/device/ncu_source_top.py /tmp/source.csv > "$out/source_top.txt" 2>&1
  xz -T4 -c /tmp/source.csv > "$out/source.csv.xz"
  xz -T4 -c /tmp/ws.ncu-rep > "$out/ws.ncu-rep.xz"
  grep -v "^==PROF==" "$out/ncu.txt" | grep -E "Duration|Elapsed Cycles|Compute \(SM\) Th|Issued Warp|No Eligible|Eligible Warps|Stall|L1/TEX Hit|L2 Hit|Mem Busy|Max Bandwidth" | head -60
  head -60 "$out/source_top.txt"
fi
exit "$tests_rc"

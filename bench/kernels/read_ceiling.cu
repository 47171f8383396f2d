// read_ceiling: the fastest a single kernel launch reads N bytes of HBM, timed the way
// nvfp4_gemm_bench times a GEMM (kBatch launches captured in one CUDA graph, each reading its
// own copy of the bytes, the copies together larger than 4× the L2, median of kRepeats replays
// over kBatch). It is the ceiling for issue 3's decode-size target ("M ≤ 16 at ≥ 80 % of the
// measured HBM bandwidth"): a GEMM of those weights reads at least their bytes in one launch,
// so it cannot beat a launch that does nothing else. Nothing to check against the CPU: the
// kernel only folds what it reads into one word per block, stored so no load is dead.
//
// The read kernel and its timing are in read_ceiling.h. With `host`, the same kernel reads
// mapped pinned host memory (expert offload's stacks), each launch a fresh stretch of a 2 GiB
// buffer, beside a host-to-device cudaMemcpyAsync of the same bytes: how fast a kernel can pull
// weights over PCIe, against the copy engines.
//   usage: read_ceiling [host] [MB list, default the V4 decode GEMMs' weight bytes]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include "bench_harness.h"
#include "read_ceiling.h"

namespace dsv4::bench {
namespace {

// Kernel reads of mapped host memory and host-to-device copies of each size, GB/s.
void host_reads(const std::vector<int64_t>& kilobytes, int n_sm) {
  const int64_t buffer_bytes = 2ll << 30;
  Result<Tensor> host = Tensor::empty_mapped_host(DType::kU8, {buffer_bytes});
  DSV4_CHECK(host.ok(), "pinned host allocation failed");
  std::memset(host->view().data, 1, buffer_bytes);
  const Tensor sink = device_tensor(DType::kI32, {8 * n_sm});
  std::printf("| bytes | kernel µs (blocks an SM) | kernel GB/s | copy engine µs | copy GB/s |\n");
  std::printf("|---:|---:|---:|---:|---:|\n");
  for (const int64_t kb : kilobytes) {
    const int64_t bytes = kb * 1024 / 16 * 16;
    const int64_t stretches = std::max<int64_t>(1, buffer_bytes / bytes);
    const auto* base = host->view().data_as<const uint8_t>();
    double best = 1e30;
    int best_blocks = 0;
    for (const int blocks : {1, 2, 4}) {
      const double us = graph_us_per_call([&](int i) {
        read_kernel<<<blocks * n_sm, kThreads, 0, kernels::cuda::op_stream()>>>(
            reinterpret_cast<const uint4*>(base + (i % stretches) * bytes), bytes / 16,
            sink.view().data_as<int32_t>());
        DSV4_CUDA_CHECK(cudaGetLastError());
      });
      if (us < best) best = us, best_blocks = blocks;
    }
    const Tensor device = device_tensor(DType::kU8, {bytes});
    const double copy_us = graph_us_per_call([&](int i) {
      DSV4_CUDA_CHECK(cudaMemcpyAsync(device.view().data, base + (i % stretches) * bytes, bytes,
                                      cudaMemcpyHostToDevice, kernels::cuda::op_stream()));
    });
    std::printf("| %.1f MB | %.1f (%d) | %.1f | %.1f | %.1f |\n", bytes / 1e6, best, best_blocks,
                bytes / (best * 1e-6) / 1e9, copy_us, bytes / (copy_us * 1e-6) / 1e9);
  }
}

int run(int argc, char** argv) {
  const bool host = argc > 1 && std::strcmp(argv[1], "host") == 0;
  if (host) --argc, ++argv;
  // The weights of nvfp4_gemm_bench's decode rows: Flash gate_up 4096×4096 and down 4096×2048,
  // Pro gate_up 6144×7168 and down 7168×3072 (codes and scales, 9/16 byte a value), in KB.
  std::vector<int64_t> kilobytes = {4096ll * 4096 * 9 / 16 / 1024, 4096ll * 2048 * 9 / 16 / 1024,
                                    6144ll * 7168 * 9 / 16 / 1024, 7168ll * 3072 * 9 / 16 / 1024};
  if (argc > 1) {
    kilobytes.clear();
    for (const int64_t mb : parse_list(argv[1])) kilobytes.push_back(mb * 1024);
  }
  cudaDeviceProp prop;
  DSV4_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const double copy = measure_copy_bandwidth();
  std::printf("device %s, %d SMs; D2D copy %.0f GB/s (read + write)\n\n", prop.name,
              prop.multiProcessorCount, copy / 1e9);
  if (host) {
    host_reads(kilobytes, prop.multiProcessorCount);
    return 0;
  }
  std::printf("| bytes | best µs a launch | blocks an SM | TB/s | %% of copy | floor µs |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|\n");
  for (const int64_t kb : kilobytes) {
    const int64_t bytes = kb * 1024 / 16 * 16;
    const ReadCeiling ceiling = read_ceiling(bytes, prop.multiProcessorCount);
    const double best = ceiling.us;
    const int best_blocks = ceiling.blocks;
    const double tbs = bytes / (best * 1e-6) / 1e12;
    std::printf("| %.1f MB | %.2f | %d | %.2f | %.0f %% | %.2f |\n", bytes / 1e6, best, best_blocks,
                tbs, 100.0 * tbs * 1e12 / copy, bytes / copy * 1e6);
  }
  return 0;
}

}  // namespace
}  // namespace dsv4::bench

int main(int argc, char** argv) { return dsv4::bench::run(argc, argv); }

// Plan and launch of the two-warpgroup NVFP4 GEMM (launch.h).
#include "launch.h"

#include <algorithm>

#include "kernel.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"

namespace dsv4::kernels::cuda::sm90::two_warpgroup {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <int kBN>
void launch(const Nvfp4GemmParams& p, int grid) {
  auto* kernel = &nvfp4_dequant_gemm_sm90_kernel<kBN, /*kOutBf16=*/true>;
  constexpr int kBytes = WgmmaSmem<kBN>::kBytes;
  static const bool configured = [&] {
    DSV4_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
    return true;
  }();
  (void)configured;
  kernel<<<grid, kThreads, kBytes, op_stream()>>>(p);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

// Estimated tiles (grouped: as if the rows were spread evenly); 256-wide tiles halve the A
// traffic but need enough of them to fill the machine.
void run(const Nvfp4GemmParams& p, int n_sm) {
  DSV4_CHECK(p.d_bf16, "two-warpgroup nvfp4 gemm: bf16 D only");
  const int n_groups = p.offsets == nullptr ? 1 : p.n_groups;
  const int64_t m_tiles = ceil_div(p.n_rows, kTileM) + (n_groups > 1 ? n_groups / 2 : 0);
  const bool wide_n = m_tiles * ceil_div(p.n, kTileN) >= n_sm;
  const int64_t n_tiles = m_tiles * ceil_div(p.n, wide_n ? kTileN : kTileN / 2);
  const int grid = static_cast<int>(n_groups > 1 ? n_sm : std::min<int64_t>(n_sm, n_tiles));
  wide_n ? launch<kTileN>(p, grid) : launch<kTileN / 2>(p, grid);
}

}  // namespace
}  // namespace dsv4::kernels::cuda::sm90::two_warpgroup

namespace dsv4::bench {

void launch_two_warpgroup(const kernels::cuda::sm90::Nvfp4GemmParams& p, int n_sm) {
  kernels::cuda::sm90::two_warpgroup::run(p, n_sm);
}

}  // namespace dsv4::bench

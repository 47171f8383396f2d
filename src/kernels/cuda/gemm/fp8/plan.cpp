// The FP8 family's choice of kernel (plan.h). README.md, "Choosing a path", has the reasoning.
#include "kernels/cuda/gemm/fp8/plan.h"

#include <algorithm>

#include "kernels/cuda/gemm/fp8/config.h"

namespace dsv4::kernels::cuda::sm90 {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Weight streaming at decode sizes. A CTA owns 16 weight rows; its warps split K's blocks. More
// warps a CTA put more loads in flight where there are few CTAs (wkv's 512 rows are 32 CTAs), at
// the price of fewer K blocks a warp and a larger reduction; double while the grid holds fewer
// than 16 warps an SM and each warp keeps ≥ 2 blocks.
Fp8GemmPlan plan_stream(int64_t m, int64_t n, int64_t k, int n_sm) {
  Fp8GemmPlan plan;
  plan.path = Fp8GemmPath::kStream;
  while (plan.stream_chunks * 8 < m) plan.stream_chunks *= 2;
  const int64_t ctas = ceil_div(n, kFp8StreamRows), k_blocks = ceil_div(k, kFp8TileK);
  const int max_warps = std::min(kFp8StreamMaxWarps, 32 / plan.stream_chunks);  // smem: ≤ 16 KB
  while (plan.stream_warps < max_warps && 2 * 2 * plan.stream_warps <= k_blocks &&
         ctas * plan.stream_warps < 16 * int64_t{n_sm}) {
    plan.stream_warps *= 2;
  }
  return plan;
}

}  // namespace

// Up to 64 rows the weights' bytes are the cost and a 128-token wgmma tile would be mostly
// padding: stream them. Above, the wgmma kernel on a persistent grid of one CTA an SM (its ring
// takes 192 KB of shared memory).
Fp8GemmPlan plan_fp8_gemm(int64_t m, int64_t n, int64_t k, int n_sm) {
  if (m <= kFp8StreamMaxTokens) return plan_stream(m, n, k, n_sm);
  Fp8GemmPlan plan;
  plan.path = Fp8GemmPath::kWsWgmma;
  const int64_t tiles = ceil_div(m, kFp8TileM) * ceil_div(n, kFp8TileN);
  plan.grid = static_cast<int>(std::min<int64_t>(n_sm, tiles));
  return plan;
}

std::string describe(const Fp8GemmPlan& plan) {
  if (plan.path == Fp8GemmPath::kStream) {
    return "stream " + std::to_string(plan.stream_warps) + " warps, " +
           std::to_string(plan.stream_chunks * 8) + " tok";
  }
  return "ws 128x128, " + std::to_string(plan.grid) + " CTAs";
}

}  // namespace dsv4::kernels::cuda::sm90

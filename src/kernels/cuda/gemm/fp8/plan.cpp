// The FP8 family's choice of kernel (plan.h). README.md, "Choosing a path", has the reasoning.
#include "kernels/cuda/gemm/fp8/plan.h"

#include <algorithm>

#include "kernels/cuda/gemm/fp8/config.h"

namespace dsv4::kernels::cuda::sm90 {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Weight streaming at decode sizes. A tile of 16 weight rows is one CTA, or a cluster of S CTAs
// splitting its K blocks. A narrow weight has few tiles (wkv's 512 rows are 32, wq_a's 1024 are
// 64): one CTA a tile would leave most SMs without loads, so S doubles (up to the portable
// cluster of 8) while the doubled grid still fits one CTA an SM and each CTA keeps
// kFp8StreamMinSplitBlocks K blocks. Then the warps: more warps a CTA put more loads in flight
// where there are few CTAs, at the price of fewer K blocks a warp and a larger reduction; double
// while the grid holds fewer than 16 warps an SM and each warp keeps ≥ 2 of its CTA's blocks.
}  // namespace

Fp8GemmPlan plan_fp8_stream(int64_t m, int64_t n, int64_t k, int n_sm, int max_split) {
  Fp8GemmPlan plan;
  plan.path = Fp8GemmPath::kStream;
  while (plan.stream_chunks * 8 < m) plan.stream_chunks *= 2;
  const int64_t tiles = ceil_div(n, kFp8StreamRows), k_blocks = ceil_div(k, kFp8TileK);
  max_split = std::min(max_split, kFp8StreamMaxSplit);
  while (plan.stream_split < max_split && 2 * tiles * plan.stream_split <= n_sm &&
         k_blocks >= 2 * plan.stream_split * kFp8StreamMinSplitBlocks) {
    plan.stream_split *= 2;
  }
  const int64_t ctas = tiles * plan.stream_split;
  const int64_t cta_blocks = ceil_div(k_blocks, plan.stream_split);
  const int max_warps = std::min(kFp8StreamMaxWarps, 32 / plan.stream_chunks);  // smem: ≤ 16 KB
  while (plan.stream_warps < max_warps && 2 * 2 * plan.stream_warps <= cta_blocks &&
         ctas * plan.stream_warps < 16 * int64_t{n_sm}) {
    plan.stream_warps *= 2;
  }
  return plan;
}

Fp8GemmPlan plan_fp8_ws(int64_t m, int64_t n, int tile_m, int n_sm) {
  Fp8GemmPlan plan;
  plan.path = Fp8GemmPath::kWsWgmma;
  plan.ws_tile_m = tile_m;
  const int64_t tiles = ceil_div(m, tile_m) * ceil_div(n, kFp8TileN);
  plan.grid = static_cast<int>(std::min<int64_t>(n_sm, tiles));
  return plan;
}

// Up to 16 rows the weights' bytes are the cost: stream them. Up to 64, stream them still where
// the wgmma kernel would have fewer than 16 CTAs (N ≤ 2048: one 128-token tile a 128-row band),
// which cannot pull the weights fast; measured on an H100 at M = 64 (docs/bench_log.md, "FP8
// GEMM"): the stream kernel 1.24-1.33× faster at N ≤ 1024, the wgmma kernel 1.05-3.3× at
// N ≥ 4096. Above, the wgmma kernel on a persistent grid of one CTA an SM, with 256-token tiles
// where those fill 90 % of the SMs (their stages carry 1.37× fewer bytes a flop), else 128.
Fp8GemmPlan plan_fp8_gemm(int64_t m, int64_t n, int64_t k, int n_sm) {
  const int64_t n_tiles = ceil_div(n, kFp8TileN);
  if (m <= 16 || (m <= kFp8StreamMaxTokens && n_tiles < 16)) return plan_fp8_stream(m, n, k, n_sm);
  const int64_t tiles_256 = ceil_div(m, 256) * n_tiles;
  return plan_fp8_ws(m, n, 10 * tiles_256 >= 9 * int64_t{n_sm} ? 256 : 128, n_sm);
}

std::string describe(const Fp8GemmPlan& plan) {
  if (plan.path == Fp8GemmPath::kStream) {
    const std::string split =
        plan.stream_split > 1 ? " x " + std::to_string(plan.stream_split) + " CTAs" : "";
    return "stream " + std::to_string(plan.stream_warps) + " warps" + split + ", " +
           std::to_string(plan.stream_chunks * 8) + " tok";
  }
  return "ws " + std::to_string(plan.ws_tile_m) + "x128, " + std::to_string(plan.grid) + " CTAs";
}

}  // namespace dsv4::kernels::cuda::sm90

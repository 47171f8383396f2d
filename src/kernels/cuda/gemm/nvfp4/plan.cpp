// The NVFP4 family's choice of kernel (plan.h): path and grid for one GEMM, and the MoE's expert
// kernels, from the shape alone. README.md, "Choosing a path", gives the reasoning.
#include "kernels/cuda/gemm/nvfp4/plan.h"

#include <algorithm>
#include <cmath>

#include "kernels/cuda/gemm/nvfp4/config.h"

namespace dsv4::kernels::cuda::sm90 {
namespace {

int ceil_div(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

// Up to this many rows the weights dominate the bytes: the small-M kernel streams them once;
// above it the wgmma kernel's 128-row tiles are filled enough.
constexpr int kSmallMaxRows = 8 * kSmallMaxTiles;
// Grouped calls (MoE): up to this many rows per group on average the small-M kernel; above, the
// warp-specialised kernel, whose cost is its decode, once per weight and token tile, whatever
// the tile's fill. Measured on an H100 (docs/bench_log.md, "NVFP4 GEMM", grouped calls; 256 or 384
// experts, every V4 shape, every group the same rows): small-M ahead at 4 and 12 rows (Flash
// gate_up 1510 against 1844 µs for 16-token tiles) and level at 16 (1769 against 1847; Pro
// within 1 %); a tile of 32, 64, 128 or 256 tokens costs 1 : 1.17 : 1.46 : 2.1 (all shapes),
// and 32-token tiles run 1.27-1.40× faster than small-M at 24 and 32 rows.
constexpr int kGroupedSmallMaxRowsPerGroup = 16;

// Tokens per tile of the warp-specialised kernel for a grouped call of `rows_per_group` on
// average. An MoE's groups do not have the same rows (random routing: about Poisson, σ ≈
// √mean), and a group with more rows than a tile pays a second tile, so the tile covers the mean
// plus one σ: with the costs above, the expected cost over Poisson rows is lowest for 32-token
// tiles to a mean of ~26 rows, 64 to ~60, 128 to ~120 (docs/bench_log.md, "NVFP4 GEMM"), which
// this reproduces.
int grouped_ws_tokens(int rows_per_group) {
  const double cover = rows_per_group + std::sqrt(static_cast<double>(rows_per_group));
  int tokens = 32;
  while (tokens < cover && tokens < 256) tokens *= 2;
  return tokens;
}

// The stream kernel at one token chunk (M ≤ 8): a warp's chain (its ring's loads, then their
// decode and MMAs) overlaps other warps' only as far as an SM holds warps, so 8 warps a CTA with
// K's steps split among them, where each keeps ≤ 4 steps (64 registers hold those without
// spilling) and the CTAs fit one wave at 2 an SM (128 registers) or at 4 (64). Measured on an
// H100 (docs/bench_log.md, "NVFP4 GEMM"): Flash gate_up 9.2 -> 7.2 µs and down 5.7 -> 4.8 (8 warps,
// 2 an SM), Pro down 10.0 -> 9.2 (8 warps, 4 an SM); Pro gate_up (7 steps a warp at 8 warps)
// keeps 4 warps: 16.0 against 20.0 at 8.
Nvfp4GemmPlan plan_stream(int n, int k, int n_sm) {
  Nvfp4GemmPlan plan;
  plan.path = Nvfp4GemmPath::kStream;
  const int64_t ctas = ceil_div(n, 16);
  const int steps = k / kStreamStepK;
  if (steps % 8 != 0 || steps / 8 > 4) return plan;  // 4 warps, 4 CTAs an SM
  for (const int min_blocks : {2, 4}) {
    if (ctas <= int64_t{min_blocks} * n_sm) {
      plan.stream_warps = 8, plan.stream_min_blocks = min_blocks;
      return plan;
    }
  }
  return plan;
}

}  // namespace

Nvfp4GemmPlan plan_small_m(int n_rows, int n, int kp, int n_groups, int n_sm) {
  Nvfp4GemmPlan plan;
  plan.path = Nvfp4GemmPath::kSmallM;
  const int rows_per_group = std::max(1, ceil_div(n_rows, n_groups));
  plan.small_tiles = 1;
  while (plan.small_tiles * 8 < rows_per_group && plan.small_tiles < kSmallMaxTiles) {
    plan.small_tiles *= 2;
  }
  plan.small_slots = std::min(n_groups, n_rows);
  // Largest K slice that still gives every SM two CTAs: fewer atomics, longer streams.
  plan.small_chunks = 8;
  const int n_row_blocks = ceil_div(n, kSmallRows), n_k_chunks = ceil_div(kp, kSmallChunk);
  auto n_ctas = [&](int chunks) {
    return int64_t{n_row_blocks} * ceil_div(n_k_chunks, chunks) * plan.small_slots;
  };
  while (plan.small_chunks > 1 &&
         (n_ctas(plan.small_chunks) < 2 * n_sm ||
          plan.small_tiles * 8 * plan.small_chunks * 256 > kSmallMaxSmem)) {
    plan.small_chunks /= 2;
  }
  return plan;
}

// The warp-specialised kernel: one matrix gets 128 weight rows × 256 tokens per tile when there
// are at least as many such tiles as SMs (the wgmma is at its widest), else 128 tokens; a
// grouped call gets tiles by rows per group (grouped_ws_tokens) and a persistent grid.
Nvfp4GemmPlan plan_ws(int n_rows, int n, int n_groups, int n_sm) {
  Nvfp4GemmPlan plan;
  plan.path = Nvfp4GemmPath::kWsWgmma;
  if (n_groups > 1) {
    plan.ws_tokens = grouped_ws_tokens(ceil_div(n_rows, n_groups));
    plan.grid = n_sm * ws_ctas_per_sm(plan.ws_tokens);
    return plan;
  }
  const int64_t n_tiles_n = ceil_div(n, kWsRows);
  plan.ws_tokens = ceil_div(n_rows, 256) * n_tiles_n >= n_sm ? 256 : 128;
  plan.grid = static_cast<int>(std::min<int64_t>(n_sm, ceil_div(n_rows, plan.ws_tokens) * n_tiles_n));
  return plan;
}

Nvfp4GemmPlan plan_nvfp4_gemm(int n_rows, int n, int k, int kp, int n_groups, int n_sm) {
  // One matrix and at most 16 tokens: the weights' bytes are the whole cost, and the stream
  // kernel reads them in one launch with nothing to zero, add atomically or convert after.
  if (n_groups == 1 && n_rows <= kStreamMaxTokens && k == kp && k % kStreamStepK == 0) {
    return plan_stream(n, k, n_sm);
  }
  const bool small = n_groups > 1 ? n_rows <= int64_t{kGroupedSmallMaxRowsPerGroup} * n_groups
                                   : n_rows <= kSmallMaxRows;
  if (small) return plan_small_m(n_rows, n, kp, n_groups, n_sm);
  return plan_ws(n_rows, n, n_groups, n_sm);
}

std::string describe(const Nvfp4GemmPlan& plan) {
  switch (plan.path) {
    case Nvfp4GemmPath::kStream:
      return "stream " + std::to_string(plan.stream_warps) + " warps, " +
             std::to_string(plan.stream_min_blocks) + " CTAs/SM";
    case Nvfp4GemmPath::kWsWgmma: return "ws 128 rows×" + std::to_string(plan.ws_tokens) + " tok";
    case Nvfp4GemmPath::kSmallM:
      return "small-M " + std::to_string(plan.small_tiles * 8) + " tok, K/" +
             std::to_string(plan.small_chunks * 128);
  }
  return "?";
}

// Measured on the H200 (docs/bench.md): the fused W4A16 path (expert_stream.cu) beats the grouped
// one at every T ≤ 512 on both V4 shapes (Flash T = 8: 297 vs 480 µs; T = 512: 2546 vs 3351;
// Pro T = 512: 7587 vs 12952). W4A4's fused kernel (expert_mma.cuh) kept its measured crossover
// (it beat the grouped path up to T = 128 and lost at 512).
constexpr int64_t kFusedMaxTokens = 512;
constexpr int64_t kFusedMaxTokensW4A4 = 128;

MoeExperts fused_moe_experts(bool w4a4) { return w4a4 ? MoeExperts::kMma : MoeExperts::kStream; }

MoeExperts plan_moe_experts(int64_t n_tokens, bool w4a4) {
  return n_tokens <= (w4a4 ? kFusedMaxTokensW4A4 : kFusedMaxTokens) ? fused_moe_experts(w4a4)
                                                                     : MoeExperts::kGrouped;
}

const char* describe(MoeExperts experts) {
  switch (experts) {
    case MoeExperts::kStream: return "fused expert_stream";
    case MoeExperts::kMma: return "fused expert_mma";
    case MoeExperts::kGrouped: return "grouped";
  }
  return "?";
}

}  // namespace dsv4::kernels::cuda::sm90

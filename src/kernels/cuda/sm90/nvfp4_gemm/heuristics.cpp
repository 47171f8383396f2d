// Path and grid for one NVFP4 GEMM from its shape alone (never from the group offsets' values,
// which live on the device). README.md, "Choosing a path", gives the reasoning.
#include "kernels/cuda/sm90/nvfp4_gemm/heuristics.h"

#include <algorithm>

#include "kernels/cuda/sm90/nvfp4_gemm/config.h"

namespace dsv4::kernels::cuda::sm90 {
namespace {

int ceil_div(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

// Up to this many rows the weights dominate the bytes: the small-M kernel streams them once;
// above it the wgmma kernel's 128-row tiles are filled enough.
constexpr int kSmallMaxRows = 8 * kSmallMaxTiles;
// Grouped calls (MoE) with few rows per group run the warp-specialised kernel with the narrowest
// token tile that holds a group's rows on average (16 to 128 tokens: the tile's MMA work beyond
// the rows is wasted, and the weights are decoded once per tile either way). Before the narrow
// tiles, the small-M kernel took up to 32 rows per group: 2.66 ms against 3.12 for 128-token
// tiles at 32 rows an expert (docs/bench.md, "grouped"; 256 experts 4096×4096).
constexpr int kGroupedNarrowestTokens = 16;
// Grouped calls: 256-token tiles only when a group's rows fill more than one 128-token tile;
// below that a 256-wide tile adds MMA work, not reuse (4.27 against 3.08 ms at 96 rows an
// expert; 4.35 against 6.01 at 192).
constexpr int kGroupedNarrowMaxRowsPerGroup = 128;

// Tokens per tile of the warp-specialised kernel for a grouped call.
int grouped_ws_tokens(int rows_per_group) {
  if (rows_per_group > kGroupedNarrowMaxRowsPerGroup) return 256;
  int tokens = kGroupedNarrowestTokens;
  while (tokens < rows_per_group) tokens *= 2;
  return tokens;
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
    plan.grid = n_sm;
    return plan;
  }
  const int64_t n_tiles_n = ceil_div(n, kWsRows);
  plan.ws_tokens = ceil_div(n_rows, 256) * n_tiles_n >= n_sm ? 256 : 128;
  plan.grid = static_cast<int>(std::min<int64_t>(n_sm, ceil_div(n_rows, plan.ws_tokens) * n_tiles_n));
  return plan;
}

Nvfp4GemmPlan plan_nvfp4_gemm(int n_rows, int n, int k, int kp, int n_groups, int n_sm,
                              bool warp_specialized) {
  // One matrix and at most 16 tokens: the weights' bytes are the whole cost, and the stream
  // kernel reads them in one launch with nothing to zero, add atomically or convert after.
  if (n_groups == 1 && n_rows <= kStreamMaxTokens && k == kp && k % kStreamStepK == 0) {
    Nvfp4GemmPlan plan;
    plan.path = Nvfp4GemmPath::kStream;
    return plan;
  }
  if (n_groups == 1 && n_rows <= kSmallMaxRows) return plan_small_m(n_rows, n, kp, n_groups, n_sm);
  if (warp_specialized) return plan_ws(n_rows, n, n_groups, n_sm);
  Nvfp4GemmPlan plan;
  plan.path = Nvfp4GemmPath::kWgmma;
  // Estimated tiles (grouped: as if the rows were spread evenly); 256-wide tiles halve the A
  // traffic but need enough of them to fill the machine.
  const int64_t m_tiles = ceil_div(n_rows, kTileM) + (n_groups > 1 ? n_groups / 2 : 0);
  plan.wide_n = m_tiles * ceil_div(n, kTileN) >= n_sm;
  const int64_t n_tiles = m_tiles * ceil_div(n, plan.wide_n ? kTileN : kTileN / 2);
  plan.grid = static_cast<int>(n_groups > 1 ? n_sm : std::min<int64_t>(n_sm, n_tiles));
  return plan;
}

}  // namespace dsv4::kernels::cuda::sm90

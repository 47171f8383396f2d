// Layout of moe_ffn's device scratch (moe_pipeline.h): every buffer of both paths at its own
// 256-byte-aligned offset, so any path can run at any T in the same workspace.
#include <algorithm>

#include "kernels/cuda/moe/kernels.h"
#include "kernels/cuda/moe/moe_pipeline.h"

namespace dsv4::kernels::cuda::moe {
namespace {

// Router logit splits: when T is small, enough logit blocks to cover the GPU several times over
// (four 64 × 64 blocks per SM of an H200, or two of the four times larger 128 × 128 ones), so
// each block runs only a few latency-bound 16-column steps of D.
int pick_logit_splits(int64_t n_tokens, int64_t n_experts, int64_t dim) {
  const int64_t tile = router_logit_tile(n_tokens);
  const int64_t wanted_blocks = tile == 128 ? 264 : 528;
  const int64_t tiles = ((n_tokens + tile - 1) / tile) * ((n_experts + tile - 1) / tile);
  int splits = 1;
  while (tiles * splits * 2 <= wanted_blocks && dim % (16 * splits * 2) == 0) splits *= 2;
  return splits;
}

}  // namespace

MoeWorkspace plan_workspace(int64_t n_tokens, const MoeWeightsView& w, const MoeConfig& cfg) {
  MoeWorkspace ws;
  ws.n_tokens = n_tokens;
  ws.dim = w.gate.size(1);
  ws.n_experts = w.gate.size(0);
  ws.ffn = w.w2.n_cols();
  ws.k_used = cfg.n_expert_used;
  ws.n_rows = n_tokens * (ws.k_used + 1);
  ws.logits_splits = pick_logit_splits(n_tokens, ws.n_experts, ws.dim);
  const int64_t t = n_tokens, s = ws.n_rows, d = ws.dim, f = ws.ffn, e = ws.n_experts;
  int64_t at = 0;
  auto take = [&at](int64_t bytes) {
    const int64_t offset = at;
    at += (std::max<int64_t>(bytes, 1) + 255) / 256 * 256;
    return offset;
  };
  ws.logits = take(4 * ws.logits_splits * t * e);
  ws.sel_expert = take(4 * t * (ws.k_used + 1));
  ws.sel_weight = take(4 * t * (ws.k_used + 1));
  ws.counts = take(4 * (e + 1));
  ws.offsets = take(4 * (e + 2));
  ws.active = take(4 * (e + 2));
  ws.row_token = take(4 * s);
  ws.row_of = take(4 * s);
  ws.x_bf16 = take(2 * s * d);
  ws.x_packed = take(t * d / 2);
  ws.x_scale = take(t * d / 16);
  ws.x_global = take(4);
  ws.x_rows_packed = take(s * d / 2);
  ws.x_rows_scale = take(s * d / 16);
  ws.gate_up = take(4 * s * 2 * f);
  ws.act = take(4 * s * f);
  ws.act_packed = take(s * f / 2);
  ws.act_scale = take(s * f / 16);
  ws.act_global = take(4);
  ws.down = take(4 * s * d);
  ws.mtile_done = take(4 * (d / 16));
  ws.total_bytes = at;
  return ws;
}

}  // namespace dsv4::kernels::cuda::moe

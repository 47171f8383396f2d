// The CUDA MoE pipeline's own interface, below cuda_ops.h's moe_ffn: the two paths it can take
// and the workspace layout they share. Plain C++ (no CUDA headers); the bench and the tests use
// it to run either path at any T.
//
// Dimension letters: T tokens, D model width, E routed experts, K experts per token, F expert
// width, S = T·(K+1) grouped rows (each token's K routed slots plus its shared-expert slot).
#pragma once

#include <cstdint>

#include "kernels/cuda/gemm/nvfp4/plan.h"
#include "kernels/ops.h"

namespace dsv4::kernels::cuda::moe {

enum class MoePath {
  kAuto,     // the plan's (gemm/nvfp4/plan.h: plan_moe_experts)
  kFused,    // decode: the fused expert kernels (expert_stream.cu, expert_mma.cuh)
  kGrouped,  // prefill: the sm90 NVFP4 grouped GEMM (nvfp4_grouped_gemm) between MoE kernels
};

// The expert kernels a path runs for T tokens and the activations' format (w4a4: NVFP4).
sm90::MoeExperts moe_experts_on(MoePath path, int64_t n_tokens, bool w4a4);

// Byte offsets of every scratch buffer inside the caller's workspace (256-byte aligned). Buffers
// of the two paths overlap where only one path uses them.
struct MoeWorkspace {
  int64_t n_tokens = 0, dim = 0, ffn = 0, n_experts = 0, k_used = 0, n_rows = 0;  // n_rows = S
  int logits_splits = 1;
  int64_t logits = 0;         // f32 [splits, T, E]: the router's logit partial sums (the small
                              // router: each expert's score, sqrt(softplus(logit)))
  int64_t sel_expert = 0;     // i32 [T, K+1] chosen experts, then E (the shared expert)
  int64_t sel_weight = 0;     // f32 [T, K+1] routing weights, then 1
  int64_t counts = 0;         // i32 [E+1] tokens per group
  int64_t offsets = 0;        // i32 [E+2] group row offsets (group E = the shared expert)
  int64_t active = 0;         // i32 [E+1] non-empty groups in order; then n_active at [E+1]
  int64_t row_token = 0;      // i32 [S] token of each grouped row
  int64_t row_of = 0;         // i32 [T, K+1] grouped row of each (token, slot)
  int64_t x_bf16 = 0;         // bf16 [S, D] (fused: [T, D] pair-interleaved; grouped: gathered)
  int64_t x_packed = 0;       // u8 [T, D/2]  x staged to NVFP4 (W4A4)
  int64_t x_scale = 0;        // u8 [T, D/16]
  int64_t x_global = 0;       // f32 [1]      its decode scale
  int64_t x_rows_packed = 0;  // u8 [S, D/2]  the same rows gathered by group (grouped path)
  int64_t x_rows_scale = 0;   // u8 [S, D/16]
  int64_t gate_up = 0;        // f32 [S, 2F] (grouped path)
  int64_t act = 0;            // f32 [S, F] (W4A4) or bf16 [S, F] (W4A16)
  int64_t act_packed = 0;     // u8 [S, F/2]
  int64_t act_scale = 0;      // u8 [S, F/16]
  int64_t act_global = 0;     // f32 [1]
  int64_t down = 0;           // f32 [S, D] expert outputs (before the routing weights)
  int64_t mtile_done = 0;     // i32 [D/16] rows finished per down m-tile (fused combine)
  int64_t total_bytes = 0;
};

MoeWorkspace plan_workspace(int64_t n_tokens, const MoeWeightsView& w, const MoeConfig& cfg);

// moe_ffn_on_path in its phases, so that ranks sharing one device can split the expert kernels
// by expert (kernels/ep/cuda/shared_device_moe.h): moe_ffn_on_path runs them in this order on
// one thread; a caller that spreads them over threads orders them itself (each thread's stream
// synchronised before a host barrier). Every phase launches on op_stream() and neither
// synchronizes nor allocates.
class MoeSteps {
 public:
  // The checks and the plan of moe_ffn_on_path; nothing is launched.
  static Result<MoeSteps> plan(const TensorView& x, const TensorView& token_ids,
                               const MoeWeightsView& w, const MoeConfig& cfg,
                               const TensorView& workspace, const TensorView& y, MoePath path);

  const MoeWorkspace& workspace() const { return ws_; }
  sm90::MoeExperts experts() const { return experts_; }
  bool fused() const;
  // The fused kernels' grid bound for every active group (the count moe_ffn_on_path passes).
  int all_slots() const;
  // The routed experts the kernels read (expert offload's copies where it makes them).
  const MoeWeightsView& weights() const { return w_; }
  // The permutation's active-group list (device, [E+2]; valid after front()).
  const int* active_groups() const;

  // Router, permutation, the touched experts' copy (expert offload), the staged input (W4A4).
  Status front() const;
  // L1 with its SwiGLU. `active` (device, [E+2]: groups in order, the count at [E+1], group E
  // last as the permutation lists it) restricts the fused kernels to those groups, at most
  // n_slots of them; every listed group's rows get the bits the full call gives them (the
  // kernels' work units are a group's m-tiles, each summed in a fixed order). nullptr: every
  // active group. The grouped path takes nullptr only.
  Status gate_up(const int* active, int n_slots) const;
  // W4A4: the SwiGLU rows staged to NVFP4 (one call over every row: the dynamic global scale is
  // their amax). W4A16: nothing.
  Status stage_hidden() const;
  // L2, restricted as gate_up; where the down kernel combines (W4A16 at T ≤ kSmallRouteTokens),
  // every active group only.
  Status down(const int* active, int n_slots) const;
  // y rows [begin, end): Σ of their routed rows (and the shared one), per token.
  Status combine(int64_t begin, int64_t end) const;

 private:
  TensorView x_, token_ids_, y_;
  MoeWeightsView given_, w_;  // as passed; as the kernels read them (touched copies)
  MoeConfig cfg_;
  MoeWorkspace ws_;
  sm90::MoeExperts experts_ = sm90::MoeExperts::kGrouped;
  char* base_ = nullptr;
};

// moe_ffn (kernels/ops.h) on a chosen path. Launches on op_stream() (kernels/cuda/stream.h); never
// synchronizes, never allocates (the grouped path's GEMMs are the sm90 kernels' own business).
Status moe_ffn_on_path(const TensorView& x, const TensorView& token_ids, const MoeWeightsView& w,
                       const MoeConfig& cfg, const TensorView& workspace, const TensorView& y,
                       MoePath path);

}  // namespace dsv4::kernels::cuda::moe

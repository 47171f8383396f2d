// The pieces of a DeepSeek-V4 MoE block (kernels::moe_ffn's contract in ops.h) that the
// expert-parallel MoE runs on each rank. They are the same ops.h calls moe_ffn is composed of
// (linear, moe_route, moe_group, stage_activation, nvfp4_[grouped_]gemm, swiglu, moe_combine,
// add); what EP adds is only where rows live and how the two dynamic global scales are agreed.
//
// Batch independence. A rank computes its tokens' router logits and shared expert in calls
// whose row count differs from the single-rank call on all tokens; the CPU GEMMs give a row the
// same bits in any call (kernels/cpu/row_gemm.h), so these need no care. Nor do the routed
// experts: every expert's group holds the same rows in the same order on one rank and on many
// (dispatch_plan.h), so its grouped GEMM call is identical.
//
// The global scales are the only cross-row state of the block: moe_ffn stages x with
// amax(x over all T tokens) and the SwiGLU output with amax(over all T·K routed and T shared
// rows). stage_with_amax() stages with the decode scale stage_activation's dynamic path derives
// from a given amax, so a rank that first max-reduces its amax with its peers' stages the very
// bytes moe_ffn stages on the concatenation of all ranks' tokens.
//
// Dimension letters: T tokens, K experts per token, E experts (El in a slice), R grouped rows,
// D model width, F expert width.
#pragma once

#include <cstdint>

#include "base/buffer.h"
#include "kernels/ops.h"

namespace dsv4::kernels::ep {

// Host scratch for one staged activation of n_rows × n_cols (linear scales).
struct StagedBuffer {
  Tensor packed, block_scale, global_scale;
  static Result<StagedBuffer> create(int64_t n_rows, int64_t n_cols);
  StagedActivation view() const {
    return StagedActivation{packed.view(), block_scale.view(), global_scale.view(),
                            format::ScaleLayout::kLinear};
  }
};

// A rank's routing of its own tokens: moe_ffn's router and grouping.
struct TokenRouting {
  Tensor weights;  // f32 [T, K]
  Tensor ids;      // i32 [T, K]
  Tensor order;    // i32 [T·K] slots grouped by expert (moe_group)
  Tensor offsets;  // i32 [E+1]
  MoeRouting view() const { return MoeRouting{weights.view(), ids.view()}; }
};

// logits = x · gateᵀ (row by row), then moe_route (hash routing through tid2eid[token_ids] when the
// layer has a tid2eid table) and moe_group. x f32 [T, D], token_ids i64 [T] (hash layers only).
Result<TokenRouting> route_tokens(const TensorView& x, const TensorView& token_ids,
                                  const MoeWeightsView& w, const MoeConfig& cfg);

// Experts [first, first + count) of the routed stacks, sharing memory.
MoeWeightsView slice_experts(const MoeWeightsView& w, int64_t first, int64_t count);

// slice_experts' inverse for a rank's own copy of its experts: `shard` holds experts [first,
// first + shard.n_matrices()) of a stack of n_experts, and the view returned reads as that whole
// stack, matrix g at the copy's g − first, so the expert ids of the rank's groups address the
// copy unchanged (and slicing it back gives `shard`). The stack's other matrices are not there:
// its pointers stand `first` matrices before the copy, and a rank reads only its own experts.
format::Nvfp4View shard_as_stack(const format::Nvfp4View& shard, int64_t first, int64_t n_experts);

// max |x| over a contiguous f32 tensor (0 for an empty one).
float activation_amax(const TensorView& x);

// Stages x f32 [T, D] into `out` (linear scales) exactly as stage_activation's dynamic path
// would if amax(x) were `amax`.
Status stage_with_amax(const TensorView& x, float amax, const StagedActivation& out);

// dst row r = src row index[r]: codes and block scales move as bytes, the global scale too.
void gather_staged_rows(const StagedActivation& src, const int32_t* index,
                        const StagedActivation& dst);

// act f32 [R, F] = swiglu(rows · w13[g]ᵀ) per group (offsets i32 [El+1]); with an empty
// `offsets` w13 is one matrix (the shared expert), applied row by row. gate_up f32 [R, 2F] is
// scratch.
Status expert_gate_up(const StagedActivation& rows, const format::Nvfp4View& w13,
                      const TensorView& offsets, float swiglu_limit, const TensorView& gate_up,
                      const TensorView& act);

// out f32 [R, D] = act_staged · w2[g]ᵀ per group, or one matrix row by row with an empty
// `offsets`.
Status expert_down(const StagedActivation& act_staged, const format::Nvfp4View& w2,
                   const TensorView& offsets, const TensorView& out);

}  // namespace dsv4::kernels::ep

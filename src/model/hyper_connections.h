// Manifold-constrained hyper-connections (mHC; ../shared/docs/deepseek_v4.md §2.3, transformers
// DeepseekV4HyperConnection / DeepseekV4HyperHead). The residual is M parallel streams
// [T, M, D]; around each half-layer hc_pre_norm collapses them into the (normed) block input
// and computes how the block output goes back (post) and how the streams mix (comb, doubly
// stochastic through Sinkhorn), and hc_post applies that. hc_head is the final collapse before the
// norm.
//
// Dimension letters: T tokens, M streams (hc_mult), D model width.
#pragma once

#include "base/buffer.h"
#include "checkpoint/config.h"
#include "checkpoint/weights.h"
#include "kernels/ops.h"

namespace dsv4::model {

// The mixes of one site for T tokens, owned.
struct HcSite {
  Tensor pre;   // f32 [T, M]
  Tensor post;  // f32 [T, M]
  Tensor comb;  // f32 [T, M, M]
  kernels::HcMix view() const { return {pre.view(), post.view(), comb.view()}; }
};

// streams f32 [T, M, D] -> site (allocated here) and the block's input x f32 [T, D] =
// rms_norm(collapsed, block_norm [D]), collapsed = Σ_m pre_m · stream_m: the split, Sinkhorn,
// collapse and norm in one fused op (kernels::hc_pre_norm). streams_normed f32 [T, M·D] is the
// streams' own (unweighted) norm when hc_post made it, else empty. With room in x_fp8
// (model/linear.h, Fp8Room), x is also quantized there for the block's FP8 linears
// (kernels::hc_pre_norm_fp8), else x_fp8 is empty.
Status hc_pre_norm(const checkpoint::ModelConfig& config,
                   const checkpoint::HyperConnectionWeights& w, const TensorView& streams,
                   const TensorView& streams_normed, const TensorView& block_norm, HcSite& site,
                   const TensorView& x, const kernels::Fp8Activation& x_fp8 = {});

// out f32 [T, M, D] = post ⊗ (block_out + block_addend) + combᵀ · residual (out must not alias
// residual). block_addend f32 [T, D] or empty: a block whose output comes in two halves (the
// FFN's routed and shared experts) is summed here, in the expand's launch. normed f32 [T, M·D]
// or empty: the next site's input norm of out, rms_norm(out) unweighted, made in the same
// launch (kernels::hc_expand_norm), for hc_pre_norm's streams_normed.
Status hc_post(const checkpoint::ModelConfig& config, const TensorView& block_out,
               const TensorView& block_addend, const TensorView& residual, const HcSite& site,
               const TensorView& out, const TensorView& normed = {});

// streams f32 [T, M, D] -> out f32 [T, D], the weighted collapse with hc_head's weights.
// streams_normed as hc_pre_norm's: the streams' own norm when the last hc_post made it.
Status hc_head(const checkpoint::ModelConfig& config, const checkpoint::HyperConnectionWeights& w,
               const TensorView& streams, const TensorView& out,
               const TensorView& streams_normed = {});

}  // namespace dsv4::model

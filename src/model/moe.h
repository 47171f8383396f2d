// The mixture-of-experts FFN half of a layer (../shared/docs/deepseek_v4.md §2.6; transformers
// DeepseekV4SparseMoeBlock): the router (sqrtsoftplus scores; top-K of score + bias, or the
// fixed tid2eid experts of hash layers; renormalised, times routed_scaling_factor), the routed
// experts (SwiGLU with the clamp, routing weight applied to each expert's output), and the
// shared expert (same clamped SwiGLU, unweighted), summed.
//
// Dimension letters: T tokens, D model width, E routed experts, K experts per token,
// F expert width.
#pragma once

#include <cstdint>

#include "checkpoint/config.h"
#include "checkpoint/weights.h"
#include "dsv4/numerics.h"
#include "dsv4/status.h"
#include "kernels/ops.h"
#include "model/expert_amaxes.h"
#include "model/expert_placement.h"

namespace dsv4::model {

// How NVFP4 routed experts multiply (dense experts ignore it): the fused MoE op's modes.
// W4A16 rounds the expert inputs and the SwiGLU output to bf16 (the A16), W4A4 stages them to
// NVFP4 with the checkpoint's calibrated input scales (or a dynamic one when it has none).
using ExpertMode = kernels::MoeMode;

// x f32 [T, D]: the ffn_norm'ed block input; tokens i64 [T] (hash routing reads them);
// out f32 [T, D], apart from x (the shared expert reads x while the routed experts write out,
// kernels::run_beside). With `amaxes`, dense routed experts also record their inputs' amaxes
// there (a calibration forward; NVFP4 experts refuse it). NVFP4 routed experts run through
// `placement` (expert_placement.h), in place without one. The shared expert's linears run in
// profile `numerics` (model/linear.h), on x_fp8 where x comes quantized too (else it is empty).
Status moe_forward(const checkpoint::ModelConfig& config, int64_t layer,
                   const checkpoint::MoeWeights& weights, ExpertMode mode, const TensorView& x,
                   const TensorView& tokens, const TensorView& out, ExpertAmaxes* amaxes = nullptr,
                   ExpertPlacement* placement = nullptr, Numerics numerics = Numerics::kExact,
                   const kernels::Fp8Activation& x_fp8 = {});

// moe_forward's two halves, unsummed: routed_out f32 [T, D] the routed experts' weighted sum,
// shared_out f32 [T, D] the shared expert's output, both apart from x. The layer adds them in
// hc_post's expand (a launch fewer than moe_forward's add in a decode step); moe_forward is this
// and kernels::add, so the sum has the same bits either way.
Status moe_forward_parts(const checkpoint::ModelConfig& config, int64_t layer,
                         const checkpoint::MoeWeights& weights, ExpertMode mode,
                         const TensorView& x, const TensorView& tokens,
                         const TensorView& routed_out, const TensorView& shared_out,
                         ExpertAmaxes* amaxes = nullptr, ExpertPlacement* placement = nullptr,
                         Numerics numerics = Numerics::kExact,
                         const kernels::Fp8Activation& x_fp8 = {});

}  // namespace dsv4::model

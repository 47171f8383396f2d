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
#include "dsv4/status.h"

namespace dsv4::model {

// How NVFP4 routed experts multiply (dense experts ignore it).
enum class ExpertMode {
  kW4A16,  // activations stay f32/bf16; weights decoded from NVFP4
  kW4A4,   // activations staged to NVFP4 too (stage_activation), the global scales as alpha
};

// x f32 [T, D]: the ffn_norm'ed block input; tokens i64 [T] (hash routing reads them);
// out f32 [T, D].
Status moe_forward(const checkpoint::ModelConfig& config, int64_t layer,
                   const checkpoint::MoeWeights& weights, ExpertMode mode, const TensorView& x,
                   const TensorView& tokens, const TensorView& out);

}  // namespace dsv4::model

// RoPE frequencies of DeepSeek-V4 exactly as transformers derives them
// (DeepseekV4RotaryEmbedding + modeling_rope_utils._compute_yarn_parameters), including its f32
// rounding: sliding layers use plain θ = rope_theta; compressed layers (CSA/HCA, their
// compressors and the indexer) use compress_rope_theta with YaRN.
#pragma once

#include <cstdint>
#include <vector>

#include "checkpoint/config.h"

namespace dsv4::model {

// inv_freq [rope_head_dim / 2]: θ_i = base^(−2i/rope_head_dim), blended with θ_i / factor by the
// YaRN ramp when rope.yarn.
std::vector<float> rope_inv_freq(const checkpoint::RopeConfig& rope, int64_t rope_head_dim);

}  // namespace dsv4::model

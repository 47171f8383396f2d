// RoPE frequencies of DeepSeek-V4 exactly as transformers derives them
// (DeepseekV4RotaryEmbedding + modeling_rope_utils._compute_yarn_parameters), including its f32
// rounding: sliding layers use plain θ = rope_theta; compressed layers (CSA/HCA, their
// compressors and the indexer) use compress_rope_theta with YaRN.
#pragma once

#include <cstdint>
#include <vector>

#include "base/buffer.h"
#include "checkpoint/config.h"
#include "dsv4/status.h"

namespace dsv4::model {

// inv_freq [rope_head_dim / 2]: θ_i = base^(−2i/rope_head_dim), blended with θ_i / factor by the
// YaRN ramp when rope.yarn.
std::vector<float> rope_inv_freq(const checkpoint::RopeConfig& rope, int64_t rope_head_dim);

// The frequencies every layer's attention reads, f32 [rope_head_dim / 2] on the model's device:
// one table a kind of layer, since a layer's frequencies depend on its kind only. They belong to
// the model, not to a sequence: every sequence's step reads the same tables at the same
// addresses, so a captured decode step replays over any sequences (decode_graph.h).
struct RopeTables {
  Tensor sliding;     // config.rope_sliding
  Tensor compressed;  // config.rope_compressed: CSA and HCA layers, their compressors, the indexer

  static Result<RopeTables> create(const checkpoint::ModelConfig& config, Device device);
  // Layer `layer`'s (an MTP block's past config.n_layer).
  TensorView of_layer(const checkpoint::ModelConfig& config, int64_t layer) const;
};

}  // namespace dsv4::model

// One sequence's forward a layer at a time, for a caller that holds one layer's weights at a time:
// dsv4 quantize's calibration pass streams them from the checkpoint as the loader decodes them
// (runtime/calibration.h), so a checkpoint far larger than memory runs in the memory of one layer.
// The same layers as Model::forward (layer_forward over a fresh cache per layer), without the
// head unless asked (logits), in the exact profile (LayerInput's default: the loader's weights on
// the host); with `amaxes`, the routed experts record their inputs (model/expert_amaxes.h).
//
// Dimension letters: T tokens, M streams, D model width.
#pragma once

#include <cstdint>
#include <span>

#include "base/buffer.h"
#include "checkpoint/config.h"
#include "checkpoint/weights.h"
#include "dsv4/status.h"
#include "model/attention.h"
#include "model/expert_amaxes.h"

namespace dsv4::model {

class LayerwiseForward {
 public:
  // The streams of `tokens` (each in [0, V)) from the embedding, on its device.
  static Result<LayerwiseForward> start(const checkpoint::ModelConfig& config,
                                        const TensorView& embed, std::span<const int64_t> tokens,
                                        ExpertAmaxes* amaxes);

  // Runs layer `layer`, which must be the next one (0, 1, ...), with its weights; the caller may
  // free them once this returns.
  Status run_layer(int64_t layer, const checkpoint::LayerWeights& weights);

  // After the last layer: every token's logits, f32 [T, V], from the global weights (the head).
  Status logits(const checkpoint::ModelWeights& globals, const TensorView& out) const;

  int64_t next_layer() const { return next_layer_; }

 private:
  LayerwiseForward() = default;

  checkpoint::ModelConfig config_;
  ExpertAmaxes* amaxes_ = nullptr;
  Tensor tokens_;   // i64 [T]
  Tensor streams_;  // f32 [T, M, D]
  Tensor spare_;
  RowPositions positions_;  // made once, for every layer
  int64_t next_layer_ = 0;
};

}  // namespace dsv4::model

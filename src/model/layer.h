// One DeepSeek-V4 decoder layer (../shared/docs/deepseek_v4.md §2.2; transformers
// DeepseekV4DecoderLayer): the attention half and the FFN half, each wrapped by its mHC site:
//   (x, site) = hc_pre_norm(streams); streams = hc_post(block(x), streams, site).
// The rows are a batch: the tokens of several sequences concatenated, each sequence's rows
// attending only over its own cache; everything but attention runs on all rows at once.
//
// Dimension letters: T rows (tokens of all sequences), M streams, D model width.
#pragma once

#include <cstdint>
#include <span>

#include "base/buffer.h"
#include "checkpoint/weights.h"
#include "model/attention.h"
#include "model/moe.h"

namespace dsv4::model {

struct LayerInput {
  const checkpoint::ModelConfig* config = nullptr;
  int64_t layer = 0;
  const checkpoint::LayerWeights* weights = nullptr;
  ExpertMode expert_mode = ExpertMode::kW4A16;
  TensorView tokens;  // i64 [T] token ids (hash routing)
  std::span<const SequenceRows> sequences;
  ExpertAmaxes* expert_amaxes = nullptr;  // a calibration forward's record (moe_forward)
  // The rows' positions and the model's RoPE tables (RowPositions::of), made once for all layers
  // of a forward; required.
  const RowPositions* positions = nullptr;
  ExpertPlacement* placement = nullptr;  // where NVFP4 routed experts run; null: in place
  // ModelOptions::numerics: the profile of the attention (attention_forward) and of the
  // layer's dense linears (model/linear.h), the shared expert's included.
  Numerics numerics = Numerics::kExact;
};

// streams f32 [T, M, D], updated in place (through `spare`, same shape, as the other buffer).
// streams_normed, when given, carries the streams' unweighted norm [T, M·D] from one layer to
// the next (the first site's mix input, made by the last site's expand in its launch): on the
// way in empty, or the norm of streams; on the way out the norm of the new streams. It lives
// from the expand to the next layer's first mixes, where the layer's input and output are its
// only company.
Status layer_forward(const LayerInput& input, Tensor& streams, Tensor& spare,
                     Tensor* streams_normed = nullptr);

// Every id in [0, V), else invalid_argument naming the first that is not.
Status check_token_ids(std::span<const int64_t> ids, int64_t vocab_size);

// The streams before layer 0: the embedding of tokens (i64 [T] on the embedding's device) in
// each of the M streams, f32 [T, M, D].
Result<Tensor> embed_streams(const checkpoint::ModelConfig& config, const TensorView& embed,
                             const TensorView& tokens);

// What the head reads after the last layer: norm(hc_head(streams)), f32 [T, D]; streams_normed
// the streams' own norm when the last layer made it (layer_forward), else empty.
Result<Tensor> final_hidden(const checkpoint::ModelWeights& weights, const TensorView& streams,
                            const TensorView& streams_normed = {});
// The same with another block's hc_head and norm (an MTP block's own, model/mtp.h).
Result<Tensor> final_hidden(const checkpoint::ModelConfig& config,
                            const checkpoint::HyperConnectionWeights& hc_head_weights,
                            const TensorView& norm, const TensorView& streams,
                            const TensorView& streams_normed = {});

}  // namespace dsv4::model

#include "model/layerwise_forward.h"

#include <string>
#include <vector>

#include "kernels/ops.h"
#include "model/attention_cache.h"
#include "model/layer.h"
#include "model/linear.h"
#include "model/scratch.h"
#include "model/upload.h"

namespace dsv4::model {

Result<LayerwiseForward> LayerwiseForward::start(const checkpoint::ModelConfig& config,
                                                 const TensorView& embed,
                                                 std::span<const int64_t> tokens,
                                                 ExpertAmaxes* amaxes) {
  if (tokens.empty()) return invalid_argument("a layerwise forward needs tokens");
  DSV4_RETURN_IF_ERROR(check_token_ids(tokens, config.vocab_size));
  DSV4_CHECK(
      amaxes == nullptr ||
          (amaxes->n_layers() == config.n_layer && amaxes->n_experts() == config.n_routed_experts),
      "layerwise forward: expert amaxes of %lld × %lld for a model of %lld × %lld",
      (long long)(amaxes ? amaxes->n_layers() : 0), (long long)(amaxes ? amaxes->n_experts() : 0),
      (long long)config.n_layer, (long long)config.n_routed_experts);
  LayerwiseForward forward;
  forward.config_ = config;
  forward.amaxes_ = amaxes;
  const std::vector<int64_t> ids(tokens.begin(), tokens.end());
  DSV4_ASSIGN_OR_RETURN(forward.tokens_,
                        upload(ids, {static_cast<int64_t>(ids.size())}, embed.device));
  DSV4_ASSIGN_OR_RETURN(forward.streams_, embed_streams(config, embed, forward.tokens_.view()));
  DSV4_ASSIGN_OR_RETURN(forward.spare_,
                        scratch(DType::kF32, forward.streams_.shape(), embed.device));
  // Every layer's cache has the same ring, so the rows' positions are made once (layer 0's).
  const auto n_tokens = static_cast<int64_t>(ids.size());
  DSV4_ASSIGN_OR_RETURN(AttentionCache cache,
                        AttentionCache::create(config, 0, n_tokens, embed.device));
  const SequenceRows rows[] = {{.begin = 0, .end = n_tokens, .start_pos = 0, .cache = &cache}};
  DSV4_ASSIGN_OR_RETURN(forward.positions_, RowPositions::of(config, rows, n_tokens, embed.device));
  return forward;
}

Status LayerwiseForward::run_layer(int64_t layer, const checkpoint::LayerWeights& weights) {
  if (layer != next_layer_ || layer >= config_.n_layer) {
    return invalid_argument("layerwise forward: layer " + std::to_string(layer) + " run, layer " +
                            std::to_string(next_layer_) + " is next of " +
                            std::to_string(config_.n_layer));
  }
  const int64_t n_tokens = tokens_.numel();
  DSV4_ASSIGN_OR_RETURN(AttentionCache cache,
                        AttentionCache::create(config_, layer, n_tokens, streams_.device()));
  const SequenceRows rows[] = {{.begin = 0, .end = n_tokens, .start_pos = 0, .cache = &cache}};
  const LayerInput input{.config = &config_,
                         .layer = layer,
                         .weights = &weights,
                         .expert_mode = ExpertMode::kW4A16,
                         .tokens = tokens_.view(),
                         .sequences = rows,
                         .expert_amaxes = amaxes_,
                         .positions = &positions_};
  DSV4_RETURN_IF_ERROR(layer_forward(input, streams_, spare_));
  ++next_layer_;
  return ok_status();
}

Status LayerwiseForward::logits(const checkpoint::ModelWeights& globals,
                                const TensorView& out) const {
  if (next_layer_ != config_.n_layer) {
    return invalid_argument("layerwise forward: logits after layer " +
                            std::to_string(next_layer_ - 1) + " of " +
                            std::to_string(config_.n_layer));
  }
  DSV4_ASSIGN_OR_RETURN(Tensor hidden, final_hidden(globals, streams_.view()));
  return linear(hidden.view(), globals.head, out, Numerics::kExact);
}

}  // namespace dsv4::model

#include "model/layerwise_forward.h"

#include <string>
#include <vector>

#include "kernels/ops.h"
#include "model/attention_cache.h"
#include "model/layer.h"
#include "model/scratch.h"
#include "model/upload.h"

namespace dsv4::model {

Result<LayerwiseForward> LayerwiseForward::start(const checkpoint::ModelConfig& config,
                                                 const TensorView& embed,
                                                 std::span<const int64_t> tokens,
                                                 ExpertAmaxes* amaxes) {
  if (tokens.empty()) return invalid_argument("a layerwise forward needs tokens");
  DSV4_RETURN_IF_ERROR(check_token_ids(tokens, config.vocab_size));
  if (amaxes != nullptr &&
      (amaxes->n_layers() != config.n_layer || amaxes->n_experts() != config.n_routed_experts)) {
    return invalid_argument("expert amaxes of " + std::to_string(amaxes->n_layers()) +
                            " layers × " + std::to_string(amaxes->n_experts()) +
                            " experts for a model of " + std::to_string(config.n_layer) + " × " +
                            std::to_string(config.n_routed_experts));
  }
  LayerwiseForward forward;
  forward.config_ = config;
  forward.amaxes_ = amaxes;
  const std::vector<int64_t> ids(tokens.begin(), tokens.end());
  DSV4_ASSIGN_OR_RETURN(forward.tokens_,
                        upload(ids, {static_cast<int64_t>(ids.size())}, embed.device));
  DSV4_ASSIGN_OR_RETURN(forward.streams_, embed_streams(config, embed, forward.tokens_.view()));
  DSV4_ASSIGN_OR_RETURN(forward.spare_,
                        scratch(DType::kF32, forward.streams_.shape(), embed.device));
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
  const SequenceRows rows[] = {{0, n_tokens, 0, &cache}};
  const LayerInput input{&config_,       layer, &weights, ExpertMode::kW4A16,
                         tokens_.view(), rows,  amaxes_};
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
  return kernels::linear(hidden.view(), globals.head.view(), out);
}

}  // namespace dsv4::model

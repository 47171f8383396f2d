#include "model/deepseek_v4.h"

#include <string>

#include "kernels/ops.h"
#include "model/hyper_connections.h"
#include "model/layer.h"
#include "model/scratch.h"
#include "model/upload.h"

namespace dsv4::model {

Model::Model(const checkpoint::ModelWeights& weights, ModelOptions options)
    : weights_(&weights), options_(options) {}

Result<SequenceCache> Model::new_cache(int64_t max_positions, int64_t max_step_tokens,
                                       CacheStart start) const {
  SequenceCache cache;
  for (int64_t layer = 0; layer < config().n_layer; ++layer) {
    DSV4_ASSIGN_OR_RETURN(
        AttentionCache c,
        AttentionCache::create(config(), layer, max_positions, device(), max_step_tokens, start));
    cache.layers.push_back(std::move(c));
  }
  return cache;
}

Status Model::check_chunk(const SequenceChunk& chunk) const {
  const int64_t n = static_cast<int64_t>(chunk.tokens.size());
  DSV4_CHECK(chunk.cache != nullptr && chunk.cache->layers.size() == weights_->layers.size(),
             "chunk without a cache of %zu layers", weights_->layers.size());
  DSV4_CHECK(chunk.logits.rank() == 2 && chunk.logits.size(1) == config().vocab_size &&
                 (chunk.logits.size(0) == n || chunk.logits.size(0) == 1) && n > 0,
             "logits must be f32 [T or 1, V] for a non-empty chunk");
  for (int64_t id : chunk.tokens) {
    if (id < 0 || id >= config().vocab_size) {
      return invalid_argument("token id " + std::to_string(id) + " outside the vocabulary [0, " +
                              std::to_string(config().vocab_size) + ")");
    }
  }
  if (chunk.start_pos != chunk.cache->n_tokens()) {
    return invalid_argument("start_pos " + std::to_string(chunk.start_pos) +
                            " does not continue a cache of " +
                            std::to_string(chunk.cache->n_tokens()) + " tokens");
  }
  DSV4_CHECK(!chunk.snapshot || (chunk.snapshot->layers.size() == weights_->layers.size() &&
                                 chunk.snapshot_after > 0 && chunk.snapshot_after < n),
             "a snapshot needs %zu layers and a position inside the chunk",
             weights_->layers.size());
  return ok_status();
}

Status Model::forward(std::span<const SequenceChunk> chunks) const { return run(chunks, nullptr); }

Status Model::forward(std::span<const SequenceChunk> chunks, ExpertAmaxes& amaxes) const {
  const checkpoint::ModelConfig& c = config();
  if (amaxes.n_layers() != c.n_layer || amaxes.n_experts() != c.n_routed_experts) {
    return invalid_argument("expert amaxes of " + std::to_string(amaxes.n_layers()) + " layers × " +
                            std::to_string(amaxes.n_experts()) + " experts for a model of " +
                            std::to_string(c.n_layer) + " × " + std::to_string(c.n_routed_experts));
  }
  return run(chunks, &amaxes);
}

Status Model::run(std::span<const SequenceChunk> chunks, ExpertAmaxes* amaxes) const {
  const checkpoint::ModelConfig& c = config();
  std::vector<int64_t> ids;
  for (const SequenceChunk& chunk : chunks) {
    DSV4_RETURN_IF_ERROR(check_chunk(chunk));
    ids.insert(ids.end(), chunk.tokens.begin(), chunk.tokens.end());
  }
  const int64_t n_rows = static_cast<int64_t>(ids.size());
  DSV4_ASSIGN_OR_RETURN(Tensor tokens, upload(ids, {n_rows}, device()));

  // Embedding, then M identical copies of it as the initial streams [T, M, D].
  DSV4_ASSIGN_OR_RETURN(Tensor x, scratch(DType::kF32, {n_rows, c.hidden_size}, device()));
  DSV4_RETURN_IF_ERROR(kernels::embedding(weights_->embed.view(), tokens.view(), x.view()));
  DSV4_ASSIGN_OR_RETURN(Tensor streams,
                        scratch(DType::kF32, {n_rows, c.hc_mult, c.hidden_size}, device()));
  DSV4_RETURN_IF_ERROR(kernels::hc_repeat(x.view(), streams.view()));
  DSV4_ASSIGN_OR_RETURN(Tensor spare, scratch(DType::kF32, streams.shape(), device()));

  std::vector<SequenceRows> rows(chunks.size());
  for (int64_t layer = 0; layer < c.n_layer; ++layer) {
    int64_t begin = 0;
    for (size_t i = 0; i < chunks.size(); ++i) {
      const int64_t end = begin + static_cast<int64_t>(chunks[i].tokens.size());
      const SequenceChunk& chunk = chunks[i];
      rows[i] = {begin,
                 end,
                 chunk.start_pos,
                 &chunk.cache->layers[layer],
                 chunk.snapshot ? &chunk.snapshot->layers[layer] : nullptr,
                 chunk.start_pos + chunk.snapshot_after};
      begin = end;
    }
    const LayerInput input{
        &c, layer, &weights_->layers[layer], options_.expert_mode, tokens.view(), rows, amaxes};
    DSV4_RETURN_IF_ERROR(layer_forward(input, streams, spare));
  }
  return lm_head(chunks, streams);
}

// logits = head · norm(hc_head(streams)), in f32, only for the rows each chunk asked for.
Status Model::lm_head(std::span<const SequenceChunk> chunks, const Tensor& streams) const {
  const checkpoint::ModelConfig& c = config();
  const int64_t n_rows = streams.shape()[0];
  DSV4_ASSIGN_OR_RETURN(Tensor hidden, scratch(DType::kF32, {n_rows, c.hidden_size}, device()));
  DSV4_RETURN_IF_ERROR(hc_head(c, weights_->hc_head, streams.view(), hidden.view()));
  DSV4_RETURN_IF_ERROR(kernels::rms_norm(hidden.view(), weights_->norm.view(),
                                         static_cast<float>(c.rms_norm_eps), hidden.view()));
  int64_t end = 0;
  for (const SequenceChunk& chunk : chunks) {
    end += static_cast<int64_t>(chunk.tokens.size());
    const TensorView rows = hidden.view().rows(end - chunk.logits.size(0), end);
    DSV4_RETURN_IF_ERROR(kernels::linear(rows, weights_->head.view(), chunk.logits));
  }
  return ok_status();
}

Status Model::forward(std::span<const int64_t> tokens, int64_t start_pos, SequenceCache& cache,
                      const TensorView& logits) const {
  const SequenceChunk chunk{tokens, start_pos, &cache, logits};
  return forward(std::span<const SequenceChunk>(&chunk, 1));
}

}  // namespace dsv4::model

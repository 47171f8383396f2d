#include "model/deepseek_v4.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/device.h"
#include "kernels/ops.h"
#include "model/cache_copy.h"
#include "model/decode_graph.h"
#include "model/gather_views.h"
#include "model/hyper_connections.h"
#include "model/layer.h"
#include "model/linear.h"
#include "model/scratch.h"
#include "model/upload.h"

namespace dsv4::model {
namespace {

Result<std::shared_ptr<const RopeTables>> shared_rope(const checkpoint::ModelWeights& weights) {
  const Device device = weights.embed.device();
  DSV4_ASSIGN_OR_RETURN(RopeTables made, RopeTables::create(weights.config, device));
  // Made on this thread's stream, read on the thread that steps the model (a server's worker):
  // there only once done, as the weights' uploads are (checkpoint/to_device.cpp).
  if (device == Device::kCuda) DSV4_RETURN_IF_ERROR(finish_device_work());
  return std::make_shared<const RopeTables>(std::move(made));
}

}  // namespace

Model::Model(const checkpoint::ModelWeights& weights, ModelOptions options)
    : weights_(&weights),
      options_(options),
      graphs_(options.cuda_graph
                  ? std::make_shared<DecodeGraphs>(padding_max_batch(weights, options))
                  : nullptr),
      rope_(shared_rope(weights)) {}

DecodeGraphStats Model::decode_graph_stats() const {
  return graphs_ ? graphs_->stats() : DecodeGraphStats{};
}

Result<DecodeGraphPlan> Model::plan_decode_graphs(int64_t max_batch, int64_t max_positions) const {
  if (!graphs_) return DecodeGraphPlan{};
  return graphs_->plan(*this, max_batch, max_positions);
}

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

Result<AttentionCache> Model::new_mtp_cache(int64_t max_positions) const {
  return mtp_cache(*weights_, 0, max_positions);
}

Status Model::mtp_forward(std::span<const MtpChunk> chunks) const {
  if (graphs_ && DecodeGraphs::serves_draft(*this, chunks))
    return graphs_->run_draft(*this, chunks);
  return mtp_rows(chunks, TensorView{});
}

Status Model::mtp_rows(std::span<const MtpChunk> chunks,
                       const TensorView& capacity_entry_ids) const {
  if (!rope_.ok()) return rope_.status();
  return model::mtp_forward(*weights_, 0, options_.expert_mode, chunks, options_.numerics, *rope_,
                            capacity_entry_ids);
}

Status Model::check_chunk(const SequenceChunk& chunk) const {
  const int64_t n = static_cast<int64_t>(chunk.tokens.size());
  DSV4_CHECK(chunk.cache != nullptr && chunk.cache->layers.size() == weights_->layers.size(),
             "chunk without a cache of %zu layers", weights_->layers.size());
  DSV4_CHECK(chunk.logits.rank() == 2 && chunk.logits.size(1) == config().vocab_size &&
                 (chunk.logits.size(0) == n || chunk.logits.size(0) == 1) && n > 0,
             "logits must be f32 [T or 1, V] for a non-empty chunk");
  DSV4_RETURN_IF_ERROR(check_token_ids(chunk.tokens, config().vocab_size));
  if (chunk.start_pos != chunk.cache->n_tokens()) {
    return invalid_argument("start_pos " + std::to_string(chunk.start_pos) +
                            " does not continue a cache of " +
                            std::to_string(chunk.cache->n_tokens()) + " tokens");
  }
  DSV4_CHECK(chunk.streams_out.data == nullptr ||
                 (chunk.streams_out.rank() == 3 && chunk.streams_out.size(0) <= n &&
                  chunk.streams_out.size(1) == config().hc_mult &&
                  chunk.streams_out.size(2) == config().hidden_size),
             "streams_out must be f32 [n <= T, M, D]");
  DSV4_CHECK(!chunk.snapshot || (chunk.snapshot->layers.size() == weights_->layers.size() &&
                                 chunk.snapshot_after > 0 && chunk.snapshot_after < n),
             "a snapshot needs %zu layers and a position inside the chunk",
             weights_->layers.size());
  return ok_status();
}

Status Model::forward(std::span<const SequenceChunk> chunks) const {
  if (graphs_ && DecodeGraphs::serves(*this, chunks)) return graphs_->run(*this, chunks);
  return forward_rows(chunks, TensorView{});
}

Status Model::forward_rows(std::span<const SequenceChunk> chunks,
                           const TensorView& capacity_entry_ids) const {
  const checkpoint::ModelConfig& c = config();
  if (!rope_.ok()) return rope_.status();
  std::vector<int64_t> ids;
  for (const SequenceChunk& chunk : chunks) {
    DSV4_RETURN_IF_ERROR(check_chunk(chunk));
    ids.insert(ids.end(), chunk.tokens.begin(), chunk.tokens.end());
  }
  const int64_t n_rows = static_cast<int64_t>(ids.size());
  DSV4_ASSIGN_OR_RETURN(Tensor tokens, upload(ids, {n_rows}, device()));

  DSV4_ASSIGN_OR_RETURN(Tensor streams, embed_streams(c, weights_->embed.view(), tokens.view()));
  DSV4_ASSIGN_OR_RETURN(Tensor spare, scratch(DType::kF32, streams.shape(), device()));

  // Each chunk's rows of the batch, with the caches of one layer.
  std::vector<SequenceRows> rows(chunks.size());
  const auto rows_of_layer = [&](int64_t layer) {
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
  };
  // The rows' positions and window rings are the same in every layer: made once, with every
  // layer's cache addresses (the decode rows' tables).
  rows_of_layer(0);
  DSV4_ASSIGN_OR_RETURN(RowPositions positions,
                        RowPositions::of(c, rows, n_rows, device(), *rope_));
  positions.capacity_entry_ids = capacity_entry_ids;
  if (std::any_of(rows.begin(), rows.end(), is_decode_run)) {
    std::vector<AttentionCache*> caches;
    for (int64_t layer = 0; layer < c.n_layer; ++layer) {
      rows_of_layer(layer);
      const std::vector<AttentionCache*> columns = address_columns(rows);
      caches.insert(caches.end(), columns.begin(), columns.end());
    }
    DSV4_ASSIGN_OR_RETURN(positions.cache_addresses, cache_addresses(caches, c.n_layer, device()));
  }
  // Each layer's last expand norms the streams for the next layer's first mixes in its launch,
  // the last layer's for the head's.
  Tensor streams_normed;
  for (int64_t layer = 0; layer < c.n_layer; ++layer) {
    rows_of_layer(layer);
    const LayerInput input{.config = &c,
                           .layer = layer,
                           .weights = &weights_->layers[layer],
                           .expert_mode = options_.expert_mode,
                           .tokens = tokens.view(),
                           .sequences = rows,
                           .positions = &positions,
                           .placement = options_.placement,
                           .numerics = options_.numerics};
    DSV4_RETURN_IF_ERROR(layer_forward(input, streams, spare, &streams_normed));
  }
  // The streams the chunks keep (each its last streams_out.size(0) rows) into their buffer (a
  // speculative step's): one copy when every row keeps them, one gather when some do.
  std::vector<TensorView> kept, outs;
  int64_t end = 0;
  for (const SequenceChunk& chunk : chunks) {
    end += static_cast<int64_t>(chunk.tokens.size());
    if (chunk.streams_out.data == nullptr) continue;
    kept.push_back(streams.view().rows(end - chunk.streams_out.size(0), end));
    outs.push_back(chunk.streams_out);
  }
  DSV4_RETURN_IF_ERROR(copy_views(kept, outs));
  return lm_head(chunks, streams, streams_normed.view());
}

namespace {

// Up to this many asked rows go through the head in one call (their logits, 0.5 MB a row for
// V4, staged once more before the copies into the chunks'); more rows read the head well enough
// chunk by chunk.
constexpr int64_t kJointHeadRows = 256;

// logits (in host memory) = head · rows, kHostLogitsSlabRows rows at a time through one device
// slab: each slab's copy out waits for it before the next overwrites it.
Status head_into_host(const TensorView& rows, const checkpoint::LinearWeight& head,
                      const TensorView& logits, Numerics numerics) {
  const int64_t n = rows.size(0);
  DSV4_ASSIGN_OR_RETURN(
      Tensor slab,
      Tensor::empty(DType::kF32, {std::min(n, kHostLogitsSlabRows), logits.size(1)}, rows.device));
  for (int64_t begin = 0; begin < n; begin += kHostLogitsSlabRows) {
    const int64_t end = std::min(n, begin + kHostLogitsSlabRows);
    const TensorView out = slab.view().rows(0, end - begin);
    DSV4_RETURN_IF_ERROR(linear(rows.rows(begin, end), head, out, numerics));
    DSV4_RETURN_IF_ERROR(copy_tensor(logits.rows(begin, end), out));
  }
  return ok_status();
}

// Each chunk's asked rows (its last logits.size(0) of `hidden` before its end) through the head
// into its logits.
Status head_by_chunk(const TensorView& hidden, const checkpoint::LinearWeight& head,
                     std::span<const HeadRows> chunks, Numerics numerics) {
  for (const HeadRows& chunk : chunks) {
    const TensorView rows = hidden.rows(chunk.end - chunk.logits.size(0), chunk.end);
    if (chunk.logits.device != hidden.device) {
      DSV4_RETURN_IF_ERROR(head_into_host(rows, head, chunk.logits, numerics));
    } else {
      DSV4_RETURN_IF_ERROR(linear(rows, head, chunk.logits, numerics));
    }
  }
  return ok_status();
}

// The same in one call over all n_asked rows: decode asks every row of `hidden` (one a
// sequence); otherwise the asked rows are gathered first, in one launch. Logits in one buffer
// take the head's output as they are; else it is copied into each chunk's.
Status head_in_one_call(const TensorView& hidden, const checkpoint::LinearWeight& head,
                        std::span<const HeadRows> chunks, int64_t n_asked, Numerics numerics) {
  Tensor gathered;
  TensorView asked = hidden;
  if (n_asked != hidden.size(0)) {
    DSV4_ASSIGN_OR_RETURN(gathered,
                          Tensor::empty(DType::kF32, {n_asked, hidden.size(1)}, hidden.device));
    std::vector<TensorView> rows;
    for (const HeadRows& chunk : chunks) {
      rows.push_back(hidden.rows(chunk.end - chunk.logits.size(0), chunk.end));
    }
    DSV4_RETURN_IF_ERROR(gather_views(rows, gathered.view()));
    asked = gathered.view();
  }
  // The chunks' logits as one f32 [n_asked, V] view, when they are consecutive rows of one
  // buffer (as the runtime's step and the MTP drafts make them).
  std::vector<TensorView> outs;
  for (const HeadRows& chunk : chunks) outs.push_back(chunk.logits);
  const TensorView joint = joined_rows(outs);
  if (joint.data != nullptr) return linear(asked, head, joint, numerics);
  DSV4_ASSIGN_OR_RETURN(Tensor logits,
                        Tensor::empty(DType::kF32, {n_asked, head.shape()[0]}, hidden.device));
  DSV4_RETURN_IF_ERROR(linear(asked, head, logits.view(), numerics));
  int64_t row = 0;
  for (const HeadRows& chunk : chunks) {
    const int64_t n = chunk.logits.size(0);
    DSV4_RETURN_IF_ERROR(copy_tensor(chunk.logits, logits.view().rows(row, row + n)));
    row += n;
  }
  return ok_status();
}

}  // namespace

// The head is V·D weights (1 GB in bf16 for V4) and a decode step asks one row of each
// sequence, so a few asked rows go through it in one call, read once a step, not once a
// sequence (at B = 8 on V4-Flash shapes a call a sequence costs 2 ms of an 11 ms step: ncu,
// H200; docs/bench_log.md, "The engine end to end").
Status head_rows(const TensorView& hidden, const checkpoint::LinearWeight& head,
                 std::span<const HeadRows> chunks, Numerics numerics) {
  int64_t n_asked = 0;
  bool to_host = false;
  for (const HeadRows& chunk : chunks) {
    n_asked += chunk.logits.size(0);
    to_host = to_host || chunk.logits.device != hidden.device;
  }
  if (chunks.size() == 1 || n_asked > kJointHeadRows || to_host) {
    return head_by_chunk(hidden, head, chunks, numerics);
  }
  return head_in_one_call(hidden, head, chunks, n_asked, numerics);
}

// logits = head · norm(hc_head(streams)), in f32, only for the rows each chunk asked for.
Status Model::lm_head(std::span<const SequenceChunk> chunks, const Tensor& streams,
                      const TensorView& streams_normed) const {
  DSV4_ASSIGN_OR_RETURN(const Tensor hidden,
                        final_hidden(*weights_, streams.view(), streams_normed));
  std::vector<HeadRows> rows;
  int64_t end = 0;
  for (const SequenceChunk& chunk : chunks) {
    end += static_cast<int64_t>(chunk.tokens.size());
    rows.push_back({end, chunk.logits});
  }
  return head_rows(hidden.view(), weights_->head, rows, options_.numerics);
}

Status Model::forward(std::span<const int64_t> tokens, int64_t start_pos, SequenceCache& cache,
                      const TensorView& logits) const {
  const SequenceChunk chunk{tokens, start_pos, &cache, logits};
  return forward(std::span<const SequenceChunk>(&chunk, 1));
}


Result<SequenceCache> empty_snapshot(const Model& model, int64_t n_tokens) {
  return model.new_cache(std::max<int64_t>(n_tokens, 1), /*max_step_tokens=*/1,
                         CacheStart::kForCopy);
}

Result<SequenceCache> snapshot_cache(const Model& model, const SequenceCache& cache) {
  DSV4_ASSIGN_OR_RETURN(SequenceCache snapshot, empty_snapshot(model, cache.n_tokens()));
  DSV4_RETURN_IF_ERROR(copy_cache_state(cache, snapshot));
  return snapshot;
}

}  // namespace dsv4::model

// DeepSeek-V4's MTP draft block (../shared/docs/deepseek_v4.md §2.7; the reference's
// MTPBlock.forward), block i of ModelWeights::mtp:
//   e = enorm(embed(next_ids))                    [T, D]     (the model's embedding)
//   h = hnorm(streams)                            [T, M, D]  (each stream)
//   X = e_proj(e) on every stream + h_proj(h)     [T, M, D]
//   X = block(X)                                  a full V4 layer, run as layer n_layer + i
//   logits = head(norm(hc_head(X)))               its own hc_head and norm, the model's head
// Position p's input is the trunk's last streams at p (before hc_head; SequenceChunk::
// streams_out) and the id of the token at p + 1; its logits predict the token at p + 2. Applied
// again (drafting k > 1 tokens), the block's own output streams at p stand in for the trunk's
// at p + 1. The block attends over its own cache (mtp_cache), one position per trunk position.
//
// Dimension letters: T rows (tokens of all chunks), M streams, D model width, V vocab.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "checkpoint/weights.h"
#include "model/attention_cache.h"
#include "model/moe.h"
#include "model/rope.h"

namespace dsv4::model {

// One sequence's part of an MTP call.
struct MtpChunk {
  TensorView streams = {};               // f32 [n, M, D]: the hidden streams at start_pos ..
  std::span<const int64_t> next_tokens = {};  // [n] host ids of the tokens at start_pos + 1 ..
  int64_t start_pos = 0;                 // must equal cache->n_tokens
  AttentionCache* cache = nullptr;       // mtp_cache's
  TensorView logits = {};                // f32 [n or 1, V]: every row's, or the last row's
  TensorView out_streams = {};           // optional f32 [n or 1, M, D]: the block's output
                                         // streams, every row's or the last row's
};

// An empty cache for MTP block `index` (as Model::new_cache makes a layer's).
Result<AttentionCache> mtp_cache(const checkpoint::ModelWeights& weights, int64_t index,
                                 int64_t max_positions,
                                 int64_t max_step_tokens = AttentionCache::kDefaultStepTokens);

// Moves an MTP cache on to position n_tokens (ahead of it) without drafting from the positions
// between: a sequence that resumed from a kept state (prefix caching), whose trunk streams at
// those positions were never computed here. Their window rows become zero, which costs the first
// drafts some accuracy and nothing else. The release's MTP block is sliding-window only; a
// compressed one cannot skip (unimplemented).
Status skip_mtp_cache(AttentionCache& cache, int64_t n_tokens);

// Runs every chunk through MTP block `index` (< weights.mtp.size(): the caller checks), appending
// its rows to its cache. Fails with invalid_argument for a token id outside the vocabulary or a
// start_pos that does not continue the cache.
// Runs in profile `numerics` (ModelOptions::numerics), as the main layers do, with the model's
// RoPE tables `rope` (null: tables of its own); decode rows' compressed sources as wide as
// `capacity_entry_ids` when set (RowPositions::capacity_entry_ids: a captured draft step's).
Status mtp_forward(const checkpoint::ModelWeights& weights, int64_t index, ExpertMode mode,
                   std::span<const MtpChunk> chunks, Numerics numerics = Numerics::kExact,
                   std::shared_ptr<const RopeTables> rope = nullptr,
                   const TensorView& capacity_entry_ids = {});

}  // namespace dsv4::model

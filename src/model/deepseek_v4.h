// The DeepSeek-V4 forward (../shared/docs/deepseek_v4.md §2.1; transformers DeepseekV4Model +
// DeepseekV4ForCausalLM): embedding, expansion to M identical streams, the decoder layers,
// hc_head, the final RMSNorm and the f32 lm_head. Written once against kernels/ops.h: with CPU
// weights it is the reference, with CUDA weights the product.
//
// A call processes a batch of sequences, each a chunk of new tokens continuing its own cache, so
// prefill (a long chunk) and decode (one token) are the same call.
//
// Dimension letters: T tokens, M streams (hc_mult), D model width, V vocab, L layers.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/weights.h"
#include "dsv4/numerics.h"
#include "model/attention_cache.h"
#include "model/moe.h"
#include "model/mtp.h"
#include "model/rope.h"

namespace dsv4::model {

// One sequence's part of a forward call.
struct SequenceChunk {
  std::span<const int64_t> tokens;  // host ids of the new tokens, positions start_pos..
  int64_t start_pos = 0;            // must equal cache->n_tokens()
  SequenceCache* cache = nullptr;
  // f32 [n, V]: n = tokens.size() for every position's logits, or n = 1 for the last token's
  // only (decode, and prefill when only the next token matters). On the model's device, or in
  // host memory for a chunk of more than AttentionCache::kMaxDecodeRun rows, which the head
  // then writes kHostLogitsSlabRows rows at a time (a decode step's graph writes device rows).
  TensorView logits;
  // Prefix caching: when set, the state after the chunk's first snapshot_after tokens
  // (0 < snapshot_after < tokens.size()) is copied into it, a cache of at least
  // start_pos + snapshot_after positions (model::empty_snapshot), within this same forward.
  SequenceCache* snapshot = nullptr;
  int64_t snapshot_after = 0;
  // When set, f32 [n, M, D]: the final streams (before hc_head) of the chunk's last n rows, the
  // input of an MTP draft block (model/mtp.h).
  TensorView streams_out = {};
};

// The rows of host logits (SequenceChunk::logits) the head computes on the device at a time,
// copied out after each: a prompt that asks every row's logits (echo with logprobs, dsv4 eval)
// holds this many rows of them on the device, not a step's worth (0.5 MB a row for V4).
inline constexpr int64_t kHostLogitsSlabRows = 256;

// One chunk's asked rows of the head: its last logits.size(0) rows of the hidden states before
// row `end`, into logits f32 [n, V] (on the device or, a slab at a time, in host memory).
struct HeadRows {
  int64_t end = 0;
  TensorView logits;
};

// logits = head · hidden for each chunk's asked rows, in profile `numerics`: in one call when
// they are few (and straight into their logits when those are consecutive rows of one buffer),
// so the head's weights are read once for them all; else chunk by chunk.
Status head_rows(const TensorView& hidden, const checkpoint::LinearWeight& head,
                 std::span<const HeadRows> chunks, Numerics numerics);

struct ModelOptions {
  ExpertMode expert_mode = ExpertMode::kW4A16;  // for NVFP4 experts
  // EngineOptions::numerics, the one profile of every op that has two (model/linear.h,
  // attention.h, indexer.h): each layer, the MTP block and the head take it from here. The
  // Engine refuses kFast on the CPU; the model runs it there with the CPU's references of the
  // fast linears (the attention and indexer stay exact on the CPU).
  Numerics numerics = Numerics::kExact;
  // Where the main layers' NVFP4 routed experts run (expert_placement.h; not owned, outlives
  // the model); null: in place.
  ExpertPlacement* placement = nullptr;
  // On the GPU, decode steps (one token of each sequence), and speculative decoding's verify
  // steps and MTP draft calls, replayed as CUDA graphs (model/decode_graph.h), with the same
  // bits as run op by op.
  bool cuda_graph = false;
  // With cuda_graph: a step of B sequences runs padded to its bucket (1, 2, 4, 8, … at most
  // this), so that a batch that wanders needs a graph a bucket, not one a size; 0: no padding.
  // W4A4 experts staged with dynamic scales are never padded (decode_graph.h: padding_max_batch).
  int64_t cuda_graph_max_batch = 0;
};

class DecodeGraphs;

// What the captured decode steps hold (model/decode_graph.h), for the server's /metrics.
struct DecodeGraphStats {
  int64_t graphs = 0;  // captured steps held (one a batch bucket met)
  // Device memory they hold: the graphs' own allocations (the steps' activations, from the
  // device's graph memory pool), their logits and entry ids, the padding rows' cache.
  int64_t device_bytes = 0;
  // Steps captured so far: each bucket's first, and one each time its caches' sizes outgrew
  // its graph (never for other sequences of the same sizes). After a plan, no decode step but
  // its own (speculative steps as their shapes are met).
  int64_t captures = 0;
  // What Model::plan_decode_graphs held before the first request (zeros without a plan): the
  // largest batch a graph replays (0: none) and the device memory the graphs held then, which
  // device_bytes keeps but for speculative steps' graphs, since a planned model captures no
  // decode step more.
  int64_t planned_batch = 0;
  int64_t planned_bytes = 0;
  // Speculative decoding's steps replayed so far: verify forwards and MTP draft calls.
  int64_t verify_replays = 0;
  int64_t draft_replays = 0;
};

// What Model::plan_decode_graphs captured before the first request.
struct DecodeGraphPlan {
  std::vector<int64_t> sizes;  // the rows of each step captured, ascending
  int64_t device_bytes = 0;    // DecodeGraphStats::device_bytes once they were
  std::string note;            // why the next size and those above stay eager; empty: none do
};

class Model {
 public:
  // `weights` must outlive the model; they were validated by the loader.
  Model(const checkpoint::ModelWeights& weights, ModelOptions options);

  const checkpoint::ModelConfig& config() const { return weights_->config; }
  Device device() const { return weights_->embed.device(); }

  // Empty caches for one sequence of up to max_positions tokens, run max_step_tokens at a time
  // (longer chunks are split; the window ring holds W + max_step_tokens − 1 rows); or, with
  // CacheStart::kForCopy, buffers for a kept state.
  Result<SequenceCache> new_cache(int64_t max_positions,
                                  int64_t max_step_tokens = AttentionCache::kDefaultStepTokens,
                                  CacheStart start = CacheStart::kEmptySequence) const;

  // Runs every chunk's tokens through the model, appending them to their caches. Fails with
  // invalid_argument for a token id outside the vocabulary or a start_pos that does not
  // continue the cache, resource_exhausted past the cache's capacity. With cuda_graph, a decode
  // step may replay a graph (so concurrent forwards of one Model are not allowed).
  Status forward(std::span<const SequenceChunk> chunks) const;
  // One sequence: Model::forward(tokens, start_pos, cache, logits).
  Status forward(std::span<const int64_t> tokens, int64_t start_pos, SequenceCache& cache,
                 const TensorView& logits) const;

  // The checkpoint's first MTP draft block (model/mtp.h; 0 blocks: none, no speculation): an
  // empty cache for it and a run of it (mtp_forward; with cuda_graph, a draft step may replay a
  // graph: decode_graph.h).
  int64_t n_mtp_blocks() const { return static_cast<int64_t>(weights_->mtp.size()); }
  Result<AttentionCache> new_mtp_cache(int64_t max_positions) const;
  Status mtp_forward(std::span<const MtpChunk> chunks) const;

  // The captured decode steps held now and the device memory they hold (zeros without
  // cuda_graph); safe from any thread while another runs forwards.
  DecodeGraphStats decode_graph_stats() const;
  // With cuda_graph, before the first forward: every decode step a server of up to max_batch
  // sequences of up to max_positions tokens runs is captured now, on caches of that capacity
  // (DecodeGraphs::plan), so the graphs' memory is held before any request and a later step
  // replays or runs eagerly, never captures. An empty plan without cuda_graph.
  Result<DecodeGraphPlan> plan_decode_graphs(int64_t max_batch, int64_t max_positions) const;

 private:
  friend class DecodeGraphs;
  Status check_chunk(const SequenceChunk& chunk) const;
  // forward, op by op; decode rows' compressed sources as wide as capacity_entry_ids when set
  // (RowPositions::capacity_entry_ids).
  Status forward_rows(std::span<const SequenceChunk> chunks,
                      const TensorView& capacity_entry_ids) const;
  Status lm_head(std::span<const SequenceChunk> chunks, const Tensor& streams,
                 const TensorView& streams_normed) const;
  // mtp_forward, op by op, with capacity_entry_ids as forward_rows takes them.
  Status mtp_rows(std::span<const MtpChunk> chunks, const TensorView& capacity_entry_ids) const;

  const checkpoint::ModelWeights* weights_;
  ModelOptions options_;
  std::shared_ptr<DecodeGraphs> graphs_;  // with cuda_graph: the captured decode steps
  // Every layer's RoPE frequencies, one set for all sequences (a captured decode step keeps
  // their address), or why they could not be made: every forward then fails with that.
  Result<std::shared_ptr<const RopeTables>> rope_;
};

// Prefix caching's kept states (model/cache_copy.h copies into and out of them). A copy of
// `cache`'s state in the least memory that holds it: a window ring of W rows (one token a step)
// and entries for n_tokens positions. It holds state only (CacheStart::kForCopy): it is copied
// from, never run.
Result<SequenceCache> snapshot_cache(const Model& model, const SequenceCache& cache);
// Buffers of that size, for a state of n_tokens to be copied in (SequenceChunk::snapshot).
Result<SequenceCache> empty_snapshot(const Model& model, int64_t n_tokens);

}  // namespace dsv4::model

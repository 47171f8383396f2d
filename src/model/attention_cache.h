// The per-sequence, per-layer state that lets attention_forward process a sequence in steps of
// any length (prefill in chunks, then one token at a time) and give the numbers of one full
// recompute. It holds exactly what transformers' DeepseekV4HCACache / DeepseekV4CSACache hold:
//   - the sliding window: the K=V rows of the last tokens, as a ring;
//   - per compressor (the attention's own; on CSA layers also the indexer's at width DI): the
//     projected rows (kv, gate) of tokens not yet pooled - on CSA also the previous full block,
//     whose A halves the next overlapped window needs - and the compressed entries so far.
// One AttentionCache serves one sequence; a batch of sequences of different lengths is a batch
// of caches.
//
// Dimension letters: W sliding window, Ts max tokens per step, R = W + Ts − 1 ring rows, Dh head
// dim, P rope pairs, m compress ratio, c = 2 (CSA) or 1 (HCA), d entry width (Dh, or DI for the
// indexer), C entry capacity = max_positions / m.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/buffer.h"
#include "checkpoint/config.h"
#include "dsv4/status.h"
#include "model/compressor_journal.h"

namespace dsv4::model {

// One KV compressor's state. Rows are kept block-aligned: row 0 starts a block of m tokens.
struct CompressorCache {
  int64_t ratio = 0;     // m
  bool overlap = false;  // CSA: windows of 2m tokens, stride m
  int64_t width = 0;     // d
  // Projected rows not yet pooled; on CSA the previous full block comes first (m rows; before
  // the first block: kv 0, gate −inf, which gives those slots weight 0).
  Tensor kv;    // f32 [2m, c·d]
  Tensor gate;  // f32 [2m, c·d], before the position bias
  int64_t n_rows = 0;
  Tensor entries;  // f32 [C, d]  normed and rotated, in block order
  int64_t n_entries = 0;
  CompressorJournal journal;  // speculative decoding's undo of the last step
};

// What a new cache holds: the state of a sequence with no tokens yet, ready for a forward; or
// buffers only (no initial rows), which a copy of another cache's state fills
// (cache_copy.h) and which is never run: a prefix cache's kept state, made without the uploads.
enum class CacheStart { kEmptySequence, kForCopy };

struct AttentionCache {
  // Tokens per internal step: attention_forward splits longer calls, so that the ring of
  // W + Ts − 1 rows holds every window a step reads while the step's own rows are written.
  static constexpr int64_t kDefaultStepTokens = 256;
  // A sequence's chunk of at most this many tokens without a snapshot (a decode token; a
  // speculative verify step's token and drafts) runs with the step's decode rows, one launch an
  // op for every such sequence of the batch (attention.cpp); a longer one attends on its own.
  static constexpr int64_t kMaxDecodeRun = 8;

  // For `layer` of `config`, for sequences of up to max_positions tokens, on `device`.
  static Result<AttentionCache> create(const checkpoint::ModelConfig& config, int64_t layer,
                                       int64_t max_positions, Device device,
                                       int64_t max_step_tokens = kDefaultStepTokens,
                                       CacheStart start = CacheStart::kEmptySequence);

  // W: the ring holds W + Ts − 1 rows.
  int64_t sliding_window() const { return window.shape()[0] - max_step_tokens + 1; }

  int64_t n_tokens = 0;  // tokens seen so far = the position of the next one
  int64_t max_positions = 0;
  int64_t max_step_tokens = 0;                // Ts
  Tensor window;                              // f32 [R, Dh]  the token at position p in row p mod R
  std::optional<CompressorCache> compressor;  // CSA and HCA layers
  std::optional<CompressorCache> indexer;     // CSA layers
  // HCA layers of a running sequence: i32 [C], 0 … C − 1. Every row's candidates are a prefix of
  // this (the entries so far, each row seeing those complete at its position: sparse_attention's
  // extra_positions), so a step uploads no candidate table.
  Tensor entry_ids;
};

// The caches of one sequence, one per layer.
struct SequenceCache {
  std::vector<AttentionCache> layers;
  int64_t n_tokens() const { return layers.empty() ? 0 : layers.front().n_tokens; }
};

}  // namespace dsv4::model

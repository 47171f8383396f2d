// One sequence being generated: its per-layer caches and the logits of its last step. Sessions
// are stepped in batches: step() runs the new tokens of several sessions, of any lengths (a
// prompt to prefill, one token to decode), through one Model::forward.
//
// Dimension letters: n tokens of a step, V vocab.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/buffer.h"
#include "model/deepseek_v4.h"

namespace dsv4::runtime {

class Session {
 public:
  // Room for max_positions tokens (prompt + generated).
  static Result<Session> create(const model::Model& model, int64_t max_positions);

  int64_t n_tokens() const { return cache_.n_tokens(); }
  int64_t max_positions() const { return max_positions_; }
  // Host f32 [rows × V] of the last step: every fed token's row, or only the last token's.
  std::span<const float> logits() const { return logits_; }
  // The last row: the distribution of the next token.
  std::span<const float> next_token_logits() const;

  // Prefix caching (runtime/prefix_cache.h): a compact copy of this session's state, and taking
  // such a copy as this session's own (it continues from there; its logits are gone).
  Result<model::SequenceCache> snapshot(const model::Model& model) const;
  Status resume(const model::SequenceCache& state);

  // Speculative decoding (runtime/speculative.h): the caches, which it arms before a verify
  // step and rolls back after it, and the last step's final streams (f32 [n, M, D] on the
  // model's device, when the step kept them; rows of a buffer the step's sessions share), the
  // MTP block's input.
  model::SequenceCache& cache() { return cache_; }
  const TensorView& streams() const { return streams_; }

 private:
  friend struct StepRunner;
  model::SequenceCache cache_;
  int64_t max_positions_ = 0;
  int64_t vocab_size_ = 0;
  std::vector<float> logits_;
  std::shared_ptr<const Tensor> step_streams_;  // the buffer streams_ views
  TensorView streams_;
};

struct StepInput {
  Session* session = nullptr;
  std::span<const int64_t> tokens;  // the session's next tokens, at least one
  bool all_logits = false;          // keep every row's logits, not just the last
  // When set, the state after the first snapshot_after tokens is copied into it during the step
  // (model::SequenceChunk::snapshot).
  model::SequenceCache* snapshot = nullptr;
  int64_t snapshot_after = 0;
  bool keep_streams = false;  // keep every row's final streams (Session::streams)
};

// One forward over every input; fails without touching a session whose tokens do not fit.
Status step(const model::Model& model, std::span<const StepInput> inputs);

}  // namespace dsv4::runtime

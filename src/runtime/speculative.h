// Speculative decoding with DeepSeek-V4's own MTP block (model/mtp.h). A decoding sequence
// feeds, with its last token, the k tokens the MTP block drafted after it; the step's logits at
// those k + 1 positions verify them at once:
//   - greedy requests keep the longest prefix of drafts the model would have chosen itself,
//     then the model's own choice at the first mismatch (or after the last draft: the bonus);
//   - sampled requests keep draft d (drawn from the draft distribution q) with probability
//     min(1, p(d)/q(d)), p the model's (after temperature, top-k, top-p, penalties), and on the
//     first rejection draw from norm(max(0, p − q)) instead; the tokens are then distributed
//     exactly as the model's own draws (Leviathan et al. 2023, Chen et al. 2023).
// The caches keep only what was emitted (model/cache_rollback.h). The MTP block then runs over
// the step's emitted positions - the trunk's final streams there and the next tokens - which
// fills its own cache and drafts the next step's first token; for k > 1 it runs again on its own
// output streams, once per further draft. Sequences of a batch draft together: k MTP calls a
// step for all of them. With ModelOptions::cuda_graph the verify forward and each MTP call
// replay CUDA graphs where their rows allow (model/decode_graph.h), with the same bits.
//
// Dimension letters: n drafts, V vocab, M streams, D model width.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/buffer.h"
#include "model/deepseek_v4.h"
#include "runtime/sampler.h"

namespace dsv4::runtime {

// The most drafts a step verifies (--speculative).
inline constexpr int64_t kMaxSpeculativeTokens = 4;

// What a verify step decided: the tokens to emit in order - the accepted drafts, then the
// model's own draw - token i drawn at row i of the step's logits.
struct Verdict {
  std::vector<int64_t> tokens;
  int64_t n_accepted = 0;
};

// Verifies `drafts` against rows of logits (host f32 [(n + 1) · V], row i the model's logits
// where draft i + 1 stands), drawing through `sampler` (which takes each emitted token). For
// sampled requests q[i] is the distribution draft i + 1 was drawn from (unused when greedy).
Verdict verify_drafts(std::span<const int64_t> drafts, const std::vector<std::vector<double>>& q,
                      std::span<const float> rows, Sampler& sampler);

struct DraftInput;

// One sequence's drafts and the MTP block's cache.
class Drafts {
 public:
  static Result<Drafts> create(const model::Model& model, int64_t max_positions);

  int64_t size() const { return static_cast<int64_t>(tokens_.size()) - 1; }
  // Keeps the first n drafts at most (a step without room for them all).
  void limit(int64_t n);
  // The next step's tokens: `last` (the sequence's last drawn token), then the drafts.
  std::span<const int64_t> step_tokens(int64_t last);
  // Verifies the drafts against the step's rows of logits (host f32 [(size() + 1) · V]), drawing
  // through the sequence's sampler (which takes the emitted tokens); the drafts are used up.
  Verdict verify(std::span<const float> rows, Sampler& sampler);

 private:
  friend Status draft(const model::Model& model, std::span<const DraftInput> inputs);
  // Draws draft i + 1 from the MTP block's logits at the row before it.
  void draw(std::span<const float> logits, Sampler& sampler);
  model::AttentionCache cache_;
  // The MTP cache's rows from the trunk's streams (those after are the drafts' chain).
  int64_t n_trunk_rows_ = 0;
  std::vector<int64_t> tokens_ = {0};  // [last, d1 .. dn]
  std::vector<std::vector<double>> q_;  // sampled requests: each draft's distribution [V]
};

// One sequence's part of a drafting run: the positions a step fed and kept.
struct DraftInput {
  Drafts* drafts = nullptr;
  Sampler* sampler = nullptr;
  TensorView streams = {};               // f32 [r, M, D]: the trunk's final streams there
  int64_t start_pos = 0;                 // the position of their first row
  std::span<const int64_t> next_tokens = {};  // [r]: the tokens at start_pos + 1 ..
  int64_t n_drafts = 0;                  // drafts for the next step (0: only fill the cache)
};

// Runs the MTP block over every input's rows (its cache first taken back to start_pos: the
// drafts of the last step beyond it were speculative, or moved on to it: a resumed prefix),
// then drafts each input's tokens.
Status draft(const model::Model& model, std::span<const DraftInput> inputs);

}  // namespace dsv4::runtime

// Picks the next token from a row of logits: penalties and bias applied (SamplingParams), the
// tokens that may not come next removed, then greedy, or temperature sampling restricted to the
// top k and the top-p nucleus, from a seeded generator (same seed, same choices).
//
// What may not come next is one mask: the ids the engine never draws (EngineOptions::decodable)
// and, for a constrained sequence (structured outputs), the tokens its constraint does not allow
// at that position. The logits are read where they are, through the mask and the adjustments:
// a draw copies no row of V.
//
// Speculative decoding (runtime/speculative.h) drafts tokens past the sequence's last one before
// they are verified. The sampler moves its constraint along them (`ahead` below) and keeps the
// mask of each position, so the verification of a kept draft reuses the mask its drafting made;
// a token that departs from the drafts rolls the constraint back, leaving no trace of them.
// Masks can be made ahead of their draw (prepare_masks()) on another thread while the model
// runs; every member locks the sampler, so that thread and the stepping one may meet here.
//
// Dimension letters: V vocab.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

#include "dsv4/engine.h"
#include "dsv4/structured_output.h"

namespace dsv4::runtime {

// A set of token ids: bit t % 32 of word t / 32, [ceil(V / 32)] words.
using TokenMask = std::vector<uint32_t>;

class Sampler {
 public:
  // `drawable` (null: every id): the ids that may ever be drawn.
  explicit Sampler(const SamplingParams& params,
                   std::shared_ptr<const TokenMask> drawable = nullptr);

  // logits f32 [V] -> a token id in [0, V), taken as the sequence's next (commit()).
  int64_t sample(std::span<const float> logits);

  // Makes the masks of the positions a draw will look at next (the next token's, and those past
  // the drafts given to best() and distribution() since), unless made already.
  void prepare_masks();

  // Speculative decoding draws through these, so that what it emits is distributed as
  // sample()'s draws. `ahead`: the logits are those after the sequence's tokens and then these
  // drafted ones (each drawn here at its own position); at most TokenConstraintState::kMaxRollback.
  bool greedy() const { return params_.temperature <= 0.0f; }
  // The greedy choice for these logits (penalties and bias applied, masked).
  int64_t best(std::span<const float> logits, std::span<const int64_t> ahead = {});
  // The distribution sample() draws from for these logits, f64 [V] summing to 1 (sampled
  // requests: masked, temperature, top-k and top-p applied after the penalties and bias).
  std::vector<double> distribution(std::span<const float> logits,
                                   std::span<const int64_t> ahead = {});
  // A draw from `weights` (non-negative, not all zero; need not sum to 1), not taken.
  int64_t draw_from(std::span<const double> weights);
  // True with probability p (clamped to [0, 1]).
  bool accept(double p);
  // Takes `token` (drawn by the above, at the next position) as the sequence's next: counted for
  // the penalties, and the constraint moves past it.
  void commit(int64_t token);

 private:
  // Locked by the callers below.
  void commit_locked(int64_t token);
  // The mask at the position after `ahead` (null: none), made (the constraint moved there
  // first) unless it was.
  const TokenMask* mask_at(std::span<const int64_t> ahead);
  void make_mask(TokenMask& mask);
  // Calls f(t) for every token t < n the mask allows (all when null), ascending.
  template <typename F>
  static void for_each_allowed(const TokenMask* mask, size_t n, F&& f);
  // Token t's logit less its penalties plus its bias.
  float adjusted(std::span<const float> logits, size_t t) const;
  int64_t best_masked(std::span<const float> logits, const TokenMask* mask) const;
  int64_t draw(std::span<const float> logits, const TokenMask* mask);
  // The tokens sample() may draw (allowed by the mask), most likely first, and their
  // unnormalised probabilities.
  void candidates(std::span<const float> logits, const TokenMask* mask,
                  std::vector<int64_t>& order, std::vector<double>& prob) const;

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::shared_ptr<const TokenMask> drawable_;        // null: every id
  std::unique_ptr<TokenConstraintState> constraint_;  // null: unconstrained
  // Penalties and bias: per token [V] once any applies (empty: none). penalty_[t] is
  // presence_penalty once t was drawn, plus frequency_penalty per draw; bias_[t] its logit_bias.
  std::vector<float> penalty_, bias_;
  std::unordered_map<int64_t, int64_t> counts_;  // draws of each token, when penalised
  // The drafted tokens the constraint stands past, beyond the committed ones; masks_[i] the mask
  // after ahead_[0, i) (empty until made), so [ahead_.size() + 1].
  std::vector<int64_t> ahead_;
  std::vector<TokenMask> masks_ = std::vector<TokenMask>(1);
  std::unique_ptr<std::mutex> mutex_ = std::make_unique<std::mutex>();  // movable Sampler
};

// The index of the largest logit, the lowest index on ties (torch.argmax's choice).
int64_t argmax(std::span<const float> logits);

}  // namespace dsv4::runtime

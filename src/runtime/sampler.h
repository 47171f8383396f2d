// Picks the next token from a row of logits: penalties and bias applied (SamplingParams), the
// tokens a constraint (structured outputs) does not allow removed, then greedy, or temperature
// sampling restricted to the top k and the top-p nucleus, from a seeded generator (same seed,
// same choices). The constraint moves past each token drawn.
//
// Dimension letters: V vocab.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

#include "dsv4/engine.h"
#include "dsv4/structured_output.h"

namespace dsv4::runtime {

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // logits f32 [V] -> a token id in [0, V), counted for the penalties of the next draws.
  int64_t sample(std::span<const float> logits);

  // Speculative decoding (runtime/speculative.h) draws through these, so that what it emits is
  // distributed as sample()'s draws:
  bool greedy() const { return params_.temperature <= 0.0f; }
  // The greedy choice for these logits (penalties and bias applied), not counted.
  int64_t best(std::span<const float> logits) const;
  // The distribution sample() draws from for these logits, f64 [V] summing to 1 (sampled
  // requests: temperature, top-k and top-p applied after the penalties and bias).
  std::vector<double> distribution(std::span<const float> logits) const;
  // A draw from `weights` (non-negative, not all zero; need not sum to 1), not counted.
  int64_t draw_from(std::span<const double> weights);
  // True with probability p (clamped to [0, 1]).
  bool accept(double p);
  // Counts a token drawn by the above for the penalties of the next draws.
  void count(int64_t token) { ++counts_[token]; }

 private:
  bool adjusts() const;
  // The logits less the penalties, plus the bias.
  std::vector<float> adjusted(std::span<const float> logits) const;
  // Sets the logits of the tokens the constraint does not allow now to -inf.
  void mask(std::vector<float>& logits);
  int64_t draw(std::span<const float> logits);
  // The tokens sample() may draw for these (adjusted) logits, most likely first, and their
  // unnormalised probabilities.
  void candidates(std::span<const float> logits, std::vector<int64_t>& order,
                  std::vector<double>& prob) const;

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::unordered_map<int64_t, int64_t> counts_;       // tokens drawn so far, for the penalties
  std::unique_ptr<TokenConstraintState> constraint_;  // null: unconstrained
  std::vector<uint32_t> allowed_;                     // [ceil(V / 32)] the constraint's mask
};

// The index of the largest logit, the lowest index on ties (torch.argmax's choice).
int64_t argmax(std::span<const float> logits);

}  // namespace dsv4::runtime

// Picks the next token from a row of logits: penalties and bias applied (SamplingParams), then
// greedy, or temperature sampling restricted to the top k and the top-p nucleus, from a seeded
// generator (same seed, same choices).
//
// Dimension letters: V vocab.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

#include "dsv4/engine.h"

namespace dsv4::runtime {

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // logits f32 [V] -> a token id in [0, V), counted for the penalties of the next draws.
  int64_t sample(std::span<const float> logits);

 private:
  bool adjusts() const;
  // The logits less the penalties, plus the bias.
  std::vector<float> adjusted(std::span<const float> logits) const;
  int64_t draw(std::span<const float> logits);

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::unordered_map<int64_t, int64_t> counts_;  // tokens drawn so far, for the penalties
};

// The index of the largest logit, the lowest index on ties (torch.argmax's choice).
int64_t argmax(std::span<const float> logits);

}  // namespace dsv4::runtime

// Picks the next token from a row of logits: greedy, or temperature sampling restricted to the
// top k and the top-p nucleus, from a seeded generator (same seed, same choices).
//
// Dimension letters: V vocab.
#pragma once

#include <cstdint>
#include <random>
#include <span>

#include "dsv4/engine.h"

namespace dsv4::runtime {

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // logits f32 [V] -> a token id in [0, V).
  int64_t sample(std::span<const float> logits);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
};

// The index of the largest logit, the lowest index on ties (torch.argmax's choice).
int64_t argmax(std::span<const float> logits);

}  // namespace dsv4::runtime

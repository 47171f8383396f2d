// Log-probabilities from a row of logits, for Generation::logprobs and prompt_logprobs.
//
// Dimension letters: V vocab.
#pragma once

#include <cstdint>
#include <span>

#include "dsv4/engine.h"

namespace dsv4::runtime {

// `token`'s log-softmax in logits f32 [V], and the n_top most likely tokens' (fewer when V is
// smaller), most likely first, the lower id first on ties (as argmax). The sum runs in double
// from the largest logit, so a logprob is accurate to the float it is returned in.
TokenLogprob token_logprob(std::span<const float> logits, int64_t token, int64_t n_top);

}  // namespace dsv4::runtime

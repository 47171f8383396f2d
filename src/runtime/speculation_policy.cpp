#include "runtime/speculation_policy.h"

namespace dsv4::runtime {
namespace {

void update(double& mean, int64_t n, double value, double weight) {
  mean = n == 0 ? value : mean + weight * (value - mean);
}

}  // namespace

int64_t SpeculationPolicy::group_of(int64_t n_decoding) {
  int64_t group = 1;
  while (group < n_decoding) group *= 2;
  return group;
}

bool SpeculationPolicy::pays(const Group& g) {
  // Tokens a second a sequence: τ / speculative against 1 / plain.
  return g.speculative_tokens * g.plain_seconds > g.speculative_seconds;
}

bool SpeculationPolicy::speculate(int64_t n_decoding) {
  Group& g = groups_[group_of(n_decoding)];
  if (g.n_speculative < kFirstSteps) return true;
  if (g.n_plain < kFirstSteps) return false;
  const bool retry = ++g.n_chosen % kRetryEvery == 0;
  return pays(g) != retry;
}

void SpeculationPolicy::record(int64_t n_decoding, bool speculated, double seconds,
                               double tokens_a_sequence) {
  Group& g = groups_[group_of(n_decoding)];
  // A retry's one step must be able to turn the choice soon: it weighs more.
  const bool chosen = g.n_plain < kFirstSteps || pays(g) == speculated;
  const double weight = chosen ? kWeight : kRetryWeight;
  if (speculated) {
    update(g.speculative_seconds, g.n_speculative, seconds, weight);
    update(g.speculative_tokens, g.n_speculative, tokens_a_sequence, weight);
    ++g.n_speculative;
  } else {
    update(g.plain_seconds, g.n_plain, seconds, weight);
    ++g.n_plain;
  }
}

}  // namespace dsv4::runtime

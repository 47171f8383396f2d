#include "runtime/speculation_policy.h"

#include <algorithm>

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

bool SpeculationPolicy::measured(const Group& g) {
  return g.n_speculative >= kFirstSteps && g.n_plain >= kFirstSteps;
}

bool SpeculationPolicy::pays(const Group& g) {
  // Tokens a second a sequence: τ / speculative against 1 / plain.
  return g.speculative_tokens * g.plain_seconds > g.speculative_seconds;
}

bool SpeculationPolicy::speculate(int64_t n_decoding) {
  Group& g = groups_[group_of(n_decoding)];
  if (g.n_speculative < kFirstSteps) return true;
  if (g.n_plain < kFirstSteps) return false;
  const bool retry = ++g.since_retry > g.retry_gap;
  return pays(g) != retry;
}

void SpeculationPolicy::record(int64_t n_decoding, bool speculated, double seconds,
                               double tokens_a_sequence) {
  Group& g = groups_[group_of(n_decoding)];
  const bool was_measured = measured(g), paid = pays(g);
  // A retry's step stands for its kind on its own: one step must be able to turn the choice.
  const bool retry = was_measured && paid != speculated;
  const double weight = retry ? 1.0 : kWeight;
  if (speculated) {
    update(g.speculative_seconds, g.n_speculative, seconds, weight);
    update(g.speculative_tokens, g.n_speculative, tokens_a_sequence, weight);
    ++g.n_speculative;
  } else {
    update(g.plain_seconds, g.n_plain, seconds, weight);
    ++g.n_plain;
  }
  if (!retry) return;
  g.since_retry = 0;
  g.retry_gap = pays(g) == paid ? std::min(2 * g.retry_gap, kLastRetry) : kFirstRetry;
}

}  // namespace dsv4::runtime

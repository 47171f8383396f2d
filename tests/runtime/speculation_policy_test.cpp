// SpeculationPolicy (runtime/speculation_policy.h) against step times made up here, where the
// right choice is known by hand: tokens a second a sequence, τ / speculative against 1 / plain.
//   - each batch-size group measures both kinds first (speculative, then plain), then keeps the
//     faster: at batch 1 speculation pays (1.8 tokens for 1.2× a plain step's time), at 8 it
//     does not (1.6 tokens for 3×), and the two groups do not mix (5 .. 8 share one);
//   - once chosen, one step in kRetryEvery runs the other kind;
//   - when the times change, the retries see it and the choice turns.
#include "runtime/speculation_policy.h"

#include <gtest/gtest.h>

namespace dsv4::runtime {
namespace {

constexpr int64_t kSteps = 10 * SpeculationPolicy::kRetryEvery;

struct Costs {
  double plain_seconds, speculative_seconds, tokens;
};

// Runs n steps of n_decoding sequences with these costs; returns how many speculated.
int64_t run(SpeculationPolicy& policy, int64_t n_decoding, const Costs& costs, int64_t n) {
  int64_t n_speculated = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool speculate = policy.speculate(n_decoding);
    n_speculated += speculate ? 1 : 0;
    policy.record(n_decoding, speculate,
                  speculate ? costs.speculative_seconds : costs.plain_seconds,
                  speculate ? costs.tokens : 1.0);
  }
  return n_speculated;
}

TEST(SpeculationPolicyTest, MeasuresBothKindsFirstThenKeepsTheFasterPerBatchSize) {
  SpeculationPolicy policy;
  const Costs pays{1.0, 1.2, 1.8}, loses{1.0, 3.0, 1.6};
  for (int64_t i = 0; i < SpeculationPolicy::kFirstSteps; ++i) {
    EXPECT_TRUE(policy.speculate(1));
    policy.record(1, true, pays.speculative_seconds, pays.tokens);
  }
  for (int64_t i = 0; i < SpeculationPolicy::kFirstSteps; ++i) {
    EXPECT_FALSE(policy.speculate(1));
    policy.record(1, false, pays.plain_seconds, 1.0);
  }
  // Batch 1 speculates but for one retry in kRetryEvery; batch 5 .. 8 (one group) the reverse.
  const int64_t retries = kSteps / SpeculationPolicy::kRetryEvery;
  EXPECT_EQ(run(policy, 1, pays, kSteps), kSteps - retries);
  const int64_t first = 2 * SpeculationPolicy::kFirstSteps;
  EXPECT_EQ(run(policy, 8, loses, first), SpeculationPolicy::kFirstSteps);
  EXPECT_EQ(run(policy, 5, loses, kSteps), retries);
  EXPECT_EQ(run(policy, 1, pays, SpeculationPolicy::kRetryEvery),
            SpeculationPolicy::kRetryEvery - 1);
}

TEST(SpeculationPolicyTest, TurnsWhenTheTimesChange) {
  SpeculationPolicy policy;
  run(policy, 2, {1.0, 3.0, 1.5}, kSteps);  // loses: plain, but for the retries
  // Speculation becomes cheap: the next retry measures it, and from then on it speculates.
  const Costs now{1.0, 1.1, 1.9};
  run(policy, 2, now, 2 * SpeculationPolicy::kRetryEvery);
  EXPECT_GE(run(policy, 2, now, kSteps), kSteps - kSteps / SpeculationPolicy::kRetryEvery);
  // And back: plain again once speculation costs more than it emits.
  const Costs worse{1.0, 2.5, 1.9};
  run(policy, 2, worse, 4 * SpeculationPolicy::kRetryEvery);
  EXPECT_LE(run(policy, 2, worse, kSteps), kSteps / SpeculationPolicy::kRetryEvery);
}

}  // namespace
}  // namespace dsv4::runtime

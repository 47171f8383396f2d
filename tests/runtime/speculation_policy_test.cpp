// SpeculationPolicy (runtime/speculation_policy.h) against step times made up here, where the
// right choice is known by hand: tokens a second a sequence, τ / speculative against 1 / plain.
//   - each batch-size group measures both kinds first (speculative, then plain), then keeps the
//     faster: at batch 1 speculation pays (1.8 tokens for 1.2× a plain step's time), at 8 it
//     does not (1.6 tokens for 3×), and the two groups do not mix (5 .. 8 share one);
//   - once chosen, the other kind runs once after kFirstRetry steps, then ever more rarely
//     while it keeps losing;
//   - when the times change, the next retry sees it and the choice turns; back again once the
//     chosen kind's own steps slow down.
#include "runtime/speculation_policy.h"

#include <gtest/gtest.h>

namespace dsv4::runtime {
namespace {

constexpr int64_t kSteps = 10 * SpeculationPolicy::kFirstRetry;
// Retries in kSteps chosen steps: after 32, 64, 128 steps (then 256: past kSteps).
constexpr int64_t kMaxRetries = 4;

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
  // Batch 1 speculates but for a few retries; batch 5 .. 8 (one group) the reverse.
  const int64_t at_1 = run(policy, 1, pays, kSteps);
  EXPECT_LT(at_1, kSteps);
  EXPECT_GE(at_1, kSteps - kMaxRetries);
  EXPECT_EQ(run(policy, 8, loses, 2 * SpeculationPolicy::kFirstSteps),
            SpeculationPolicy::kFirstSteps);
  const int64_t at_5 = run(policy, 5, loses, kSteps);
  EXPECT_GT(at_5, 0);
  EXPECT_LE(at_5, kMaxRetries);
  // Retries grow rarer while the choice holds: none in the next stretch of kFirstRetry steps.
  EXPECT_EQ(run(policy, 8, loses, SpeculationPolicy::kFirstRetry), 0);
}

TEST(SpeculationPolicyTest, TurnsWhenTheTimesChange) {
  SpeculationPolicy policy;
  EXPECT_LE(run(policy, 2, {1.0, 3.0, 1.5}, kSteps),
            SpeculationPolicy::kFirstSteps + kMaxRetries);  // loses: plain
  // Speculation becomes cheap: the next retry (within the longest gap) turns the choice.
  const Costs now{1.0, 1.1, 1.9};
  run(policy, 2, now, SpeculationPolicy::kLastRetry + 1);
  EXPECT_GE(run(policy, 2, now, kSteps), kSteps - kMaxRetries);
  // And back within a few of its own steps once speculation costs more than it emits.
  const Costs worse{1.0, 2.5, 1.9};
  EXPECT_LE(run(policy, 2, worse, SpeculationPolicy::kFirstRetry), 8);
  EXPECT_LE(run(policy, 2, worse, kSteps), kMaxRetries);
}

}  // namespace
}  // namespace dsv4::runtime

// token_logprob (runtime/logprobs.h) against a long-double log-softmax on random logits, wide (V4's
// vocabulary) and narrow, with ties (one of the largest): the token's logprob to float precision,
// the top alternatives in order (the lower id first on ties), never more than the vocabulary.
#include "runtime/logprobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace dsv4::runtime {
namespace {

std::vector<long double> reference_log_softmax(const std::vector<float>& logits) {
  long double sum = 0;
  for (const float x : logits) sum += std::exp(static_cast<long double>(x));
  std::vector<long double> out;
  for (const float x : logits) out.push_back(static_cast<long double>(x) - std::log(sum));
  return out;
}

TEST(TokenLogprobTest, MatchesALongDoubleLogSoftmax) {
  std::mt19937_64 rng(std::random_device{}());
  for (const int64_t v : {1, 7, 640, 5000, 129280}) {
    for (const float spread : {0.1f, 8.0f, 60.0f}) {
      SCOPED_TRACE("V " + std::to_string(v) + ", spread " + std::to_string(spread));
      std::normal_distribution<float> normal(0.0f, spread);
      std::vector<float> logits(static_cast<size_t>(v));
      for (float& x : logits) x = normal(rng);
      if (v > 3) logits[2] = logits[1];  // a tie
      if (v > 100) logits[90] = logits[40] = *std::max_element(logits.begin(), logits.end());
      const std::vector<long double> want = reference_log_softmax(logits);
      const auto token = static_cast<int64_t>(rng() % static_cast<uint64_t>(v));
      const TokenLogprob got = token_logprob(logits, token, 5);
      EXPECT_EQ(got.token, token);
      EXPECT_NEAR(
          got.logprob, static_cast<double>(want[static_cast<size_t>(token)]),
          1e-6 * std::max(1.0, std::fabs(static_cast<double>(want[static_cast<size_t>(token)]))));
      ASSERT_EQ(got.top.size(), static_cast<size_t>(std::min<int64_t>(5, v)));
      std::vector<int64_t> order(static_cast<size_t>(v));
      for (int64_t i = 0; i < v; ++i) order[static_cast<size_t>(i)] = i;
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
      });
      for (size_t i = 0; i < got.top.size(); ++i) {
        EXPECT_EQ(got.top[i].first, order[i]) << "rank " << i;
        EXPECT_NEAR(
            got.top[i].second, static_cast<double>(want[static_cast<size_t>(order[i])]),
            1e-6 *
                std::max(1.0, std::fabs(static_cast<double>(want[static_cast<size_t>(order[i])]))));
      }
    }
  }
}

TEST(TokenLogprobTest, ZeroAlternativesGivesTheTokenAlone) {
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f};
  const TokenLogprob got = token_logprob(logits, 0, 0);
  EXPECT_TRUE(got.top.empty());
  EXPECT_NEAR(got.logprob, -2.0 - std::log1p(std::exp(-1.0) + std::exp(-2.0)), 1e-6);
}

}  // namespace
}  // namespace dsv4::runtime

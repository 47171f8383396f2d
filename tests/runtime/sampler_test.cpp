// The sampler (runtime/sampler.h): greedy is argmax; a seed fixes the draws; top-k and top-p
// draw only from their sets, with the renormalised softmax probabilities (checked empirically
// against probabilities computed here in double); penalties and bias move the logits as OpenAI
// defines them.
#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dsv4/structured_output.h"
#include "testing/random.h"

namespace dsv4::runtime {
namespace {

using testing::SeededRng;

std::vector<float> random_logits(SeededRng& rng, size_t n) {
  std::normal_distribution<float> dist(0.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng.engine());
  return v;
}

// Draw frequencies of `n` samples.
std::map<int64_t, double> frequencies(const SamplingParams& params, std::span<const float> logits,
                                      int n) {
  Sampler sampler(params);
  std::map<int64_t, double> f;
  for (int i = 0; i < n; ++i) f[sampler.sample(logits)] += 1.0 / n;
  return f;
}

TEST(SamplerTest, GreedyIsArgmaxLowestIndexOnTies) {
  SeededRng rng;
  std::vector<float> logits = random_logits(rng, 97);
  const int64_t best = std::max_element(logits.begin(), logits.end()) - logits.begin();
  Sampler greedy(SamplingParams{});
  EXPECT_EQ(greedy.sample(logits), best);
  logits[3] = logits[50] = logits[best] + 1.0f;
  EXPECT_EQ(greedy.sample(logits), 3);
}

// A greedy draw scans the row in vector lanes (under a mask, when the mask allows the row's
// first largest): still std::max_element's choice (the first of the largest; a NaN never larger,
// but standing when first), against max_element and a plain scan of the allowed ids here, on rows
// of many ties (logits of a few values), some with NaNs and −∞ (one all −∞), at widths around the
// lanes' and a mask word's and V4's vocabulary, without a mask and with one allowing all but a few
// ids.
TEST(SamplerTest, GreedyOfAWideRowIsTheFirstLargestAllowed) {
  SeededRng rng;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const size_t n :
       {size_t{1}, size_t{31}, size_t{32}, size_t{33}, size_t{47}, size_t{129280}}) {
    for (int trial = 0; trial < 12; ++trial) {
      std::vector<float> logits(n);
      for (float& x : logits) x = trial == 11 ? -inf : static_cast<float>(rng.uniform_int(-3, 3));
      const auto some_id = [&] {
        return static_cast<size_t>(rng.uniform_int(0, static_cast<int64_t>(n) - 1));
      };
      if (trial >= 6 && trial < 11) {
        for (int k = 0; k < 4; ++k) logits[some_id()] = k % 2 == 0 ? nan : -inf;
        if (trial == 7) logits[0] = nan;
      }
      const int64_t want = std::max_element(logits.begin(), logits.end()) - logits.begin();
      // Holes at random ids, and at the row's first largest (the mask's slow path) in some.
      auto drawable = std::make_shared<TokenMask>((n + 31) / 32, ~0u);
      const auto forbid = [&](size_t t) { (*drawable)[t / 32] &= ~(1u << (t % 32)); };
      const int64_t holes = trial % 2 == 0 ? 0 : rng.uniform_int(1, 8);
      for (int64_t h = 0; h < holes; ++h) forbid(some_id());
      if (trial % 4 == 1) forbid(static_cast<size_t>(want));
      int64_t want_allowed = -1;
      for (size_t t = 0; t < n; ++t) {
        const bool allowed = ((*drawable)[t / 32] >> (t % 32)) & 1;
        if (allowed && (want_allowed < 0 || logits[t] > logits[want_allowed])) {
          want_allowed = static_cast<int64_t>(t);
        }
      }
      SCOPED_TRACE("width " + std::to_string(n) + ", trial " + std::to_string(trial));
      EXPECT_EQ(argmax(logits), want);
      EXPECT_EQ(Sampler(SamplingParams{}).sample(logits), want);
      if (want_allowed >= 0) {
        EXPECT_EQ(Sampler(SamplingParams{}, drawable).sample(logits), want_allowed);
      }
    }
  }
}

TEST(SamplerTest, SameSeedSameDrawsOtherSeedOtherDraws) {
  SeededRng rng;
  const std::vector<float> logits = random_logits(rng, 50);
  SamplingParams params;
  params.temperature = 1.0f;
  params.seed = rng.engine()();
  Sampler a(params), b(params);
  params.seed += 1;
  Sampler c(params);
  int n_same_ab = 0, n_same_ac = 0;
  for (int i = 0; i < 200; ++i) {
    const int64_t x = a.sample(logits), y = b.sample(logits), z = c.sample(logits);
    n_same_ab += x == y;
    n_same_ac += x == z;
  }
  EXPECT_EQ(n_same_ab, 200);
  EXPECT_LT(n_same_ac, 150);
}

TEST(SamplerTest, TopKDrawsTheKMostLikelyWithRenormalisedSoftmax) {
  SeededRng rng;
  const std::vector<float> logits = random_logits(rng, 40);
  SamplingParams params;
  params.temperature = 0.7f;
  params.top_k = 4;
  params.seed = rng.engine()();
  std::vector<int64_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  double sum = 0.0;
  for (int i = 0; i < 4; ++i) sum += std::exp(logits[order[i]] / 0.7);
  const int n = 40000;
  const auto f = frequencies(params, logits, n);
  EXPECT_LE(f.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const double p = std::exp(logits[order[i]] / 0.7) / sum;
    // 5 standard deviations of a binomial frequency.
    EXPECT_NEAR(f.count(order[i]) ? f.at(order[i]) : 0.0, p, 5 * std::sqrt(p * (1 - p) / n) + 1e-9)
        << "rank " << i;
  }
}

TEST(SamplerTest, TopPKeepsTheSmallestSetReachingP) {
  // Probabilities 0.5, 0.3, 0.15, 0.05: top_p = 0.7 keeps the first two (0.5 < 0.7 <= 0.8).
  const std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f),
                                     std::log(0.3f)};
  SeededRng rng;
  SamplingParams params;
  params.temperature = 1.0f;
  params.top_p = 0.7f;
  params.seed = rng.engine()();
  const int n = 40000;
  const auto f = frequencies(params, logits, n);
  ASSERT_EQ(f.size(), 2u);
  const double p = 0.5 / 0.8;
  EXPECT_NEAR(f.at(1), p, 5 * std::sqrt(p * (1 - p) / n));
  EXPECT_NEAR(f.at(3), 1 - p, 5 * std::sqrt(p * (1 - p) / n));
  // A tiny top_p still keeps the most likely token.
  params.top_p = 1e-6f;
  EXPECT_EQ(frequencies(params, logits, 100).size(), 1u);
}

// Each logit less presence once drawn and frequency per draw, plus its bias: computed here in
// double from the draws so far.
std::vector<float> reference_adjusted(const std::vector<float>& logits,
                                      const std::map<int64_t, int>& counts,
                                      const SamplingParams& p) {
  std::vector<float> out(logits);
  for (const auto& [token, count] : counts) {
    out[static_cast<size_t>(token)] =
        static_cast<float>(static_cast<double>(logits[static_cast<size_t>(token)]) -
                           p.presence_penalty - static_cast<double>(p.frequency_penalty) * count);
  }
  for (const auto& [token, bias] : p.logit_bias) out[static_cast<size_t>(token)] += bias;
  return out;
}

// Penalised and biased draws are the plain sampler's draws (same seed) on the reference's
// adjusted logits, greedy and sampled, while the same raw logits come back every step (so the
// penalties are what moves the choice).
TEST(SamplerTest, PenaltiesAndBiasAdjustTheLogitsOfTheDrawsSoFar) {
  SeededRng rng;
  const std::vector<float> logits = random_logits(rng, 40);
  for (const float temperature : {0.0f, 0.8f}) {
    SamplingParams p{.temperature = temperature, .seed = 7};
    p.presence_penalty = 0.6f;
    p.frequency_penalty = 0.35f;
    p.logit_bias = {{3, 1.5f}, {11, -100.0f}};
    Sampler adjusted(p);
    SamplingParams plain_params = p;
    plain_params.presence_penalty = plain_params.frequency_penalty = 0.0f;
    plain_params.logit_bias.clear();
    Sampler plain(plain_params);
    std::map<int64_t, int> counts;
    for (int step = 0; step < 60; ++step) {
      const int64_t got = adjusted.sample(logits);
      const int64_t want = plain.sample(reference_adjusted(logits, counts, p));
      ASSERT_EQ(got, want) << "temperature " << temperature << ", step " << step;
      EXPECT_NE(got, 11) << "a -100 bias bans";
      ++counts[got];
    }
    EXPECT_GT(counts.size(), 3u) << "the penalties spread the greedy choice";
  }
}

// A constraint that allows, at step k, the tokens t with t % 3 == k % 3, and records what it
// was advanced by.
class EveryThirdToken final : public TokenConstraint {
 public:
  explicit EveryThirdToken(int64_t vocab) : vocab_(vocab) {}
  struct State final : TokenConstraintState {
    std::vector<int64_t>* seen;
    void allowed_tokens(std::span<uint32_t> allowed) override {
      std::fill(allowed.begin(), allowed.end(), 0u);
      for (size_t t = seen->size() % 3; t < allowed.size() * 32; t += 3) {
        allowed[t / 32] |= 1u << (t % 32);
      }
    }
    bool advance(int64_t token) override {
      if (static_cast<size_t>(token) % 3 != seen->size() % 3) return false;
      seen->push_back(token);
      return true;
    }
    void rollback(int64_t n) override { seen->resize(seen->size() - static_cast<size_t>(n)); }
  };
  std::unique_ptr<TokenConstraintState> start() const override {
    auto s = std::make_unique<State>();
    s->seen = &seen;
    return s;
  }
  int64_t vocab_size() const override { return vocab_; }
  mutable std::vector<int64_t> seen;

 private:
  int64_t vocab_;
};

// Constrained draws are the plain sampler's draws (same seed) on logits whose disallowed tokens
// are -inf, with penalties and bias applied first; the constraint sees every token drawn.
TEST(SamplerTest, ConstraintMasksBeforeDrawingAndAdvancesByEachToken) {
  SeededRng rng;
  const std::vector<float> logits = random_logits(rng, 45);
  for (const float temperature : {0.0f, 1.0f}) {
    auto constraint = std::make_shared<EveryThirdToken>(45);
    SamplingParams p{.temperature = temperature, .seed = rng.engine()()};
    p.frequency_penalty = 0.5f;
    p.constraint = constraint;
    Sampler constrained(p);
    SamplingParams plain_params = p;
    plain_params.constraint = nullptr;
    plain_params.frequency_penalty = 0.0f;
    Sampler plain(plain_params);
    std::map<int64_t, int> counts;
    for (int step = 0; step < 30; ++step) {
      std::vector<float> want_logits = reference_adjusted(logits, counts, p);
      for (size_t t = 0; t < want_logits.size(); ++t) {
        if (static_cast<int>(t % 3) != step % 3) want_logits[t] = -INFINITY;
      }
      const int64_t got = constrained.sample(logits);
      ASSERT_EQ(got, plain.sample(want_logits))
          << "temperature " << temperature << ", step " << step;
      ++counts[got];
    }
    ASSERT_EQ(constraint->seen.size(), 30u);
  }
}

// The ids never drawn (EngineOptions::decodable) and a constraint's mask are one mask: the draws
// are the plain sampler's on logits that are -inf wherever either refuses.
TEST(SamplerTest, TheDrawableIdsAndTheConstraintAreOneMask) {
  SeededRng rng;
  constexpr size_t kVocab = 70;
  const std::vector<float> logits = random_logits(rng, kVocab);
  auto drawable = std::make_shared<TokenMask>((kVocab + 31) / 32, 0u);
  for (size_t t = 0; t < kVocab; ++t) {
    if (rng.engine()() % 4 != 0) (*drawable)[t / 32] |= 1u << (t % 32);
  }
  for (const float temperature : {0.0f, 1.0f}) {
    for (const bool constrained : {false, true}) {
      auto constraint = std::make_shared<EveryThirdToken>(kVocab);
      SamplingParams p{.temperature = temperature, .seed = rng.engine()()};
      if (constrained) p.constraint = constraint;
      Sampler masked(p, drawable);
      SamplingParams plain_params = p;
      plain_params.constraint = nullptr;
      Sampler plain(plain_params);
      for (int step = 0; step < 30; ++step) {
        std::vector<float> want_logits = logits;
        for (size_t t = 0; t < kVocab; ++t) {
          const bool allowed = ((*drawable)[t / 32] >> (t % 32)) & 1;
          if (!allowed || (constrained && static_cast<int>(t % 3) != step % 3)) {
            want_logits[t] = -INFINITY;
          }
        }
        ASSERT_EQ(masked.sample(logits), plain.sample(want_logits))
            << "temperature " << temperature << ", constrained " << constrained << ", step "
            << step;
      }
    }
  }
}

// Drafted tokens (speculative decoding) are drawn at their own positions: best() past `ahead`
// follows the constraint's mask there; a committed token other than the first draft takes the
// drafts back, and a kept one leaves the constraint past the committed tokens only.
TEST(SamplerTest, DraftsAheadAreDrawnAtTheirPositionsAndLeaveNoTrace) {
  SeededRng rng;
  const std::vector<float> logits = random_logits(rng, 45);
  auto constraint = std::make_shared<EveryThirdToken>(45);
  Sampler sampler(SamplingParams{.constraint = constraint});
  std::vector<int64_t> ahead;
  for (int depth = 0; depth < 4; ++depth) {
    const int64_t draft = sampler.best(logits, ahead);
    EXPECT_EQ(draft % 3, depth % 3) << "depth " << depth;
    ahead.push_back(draft);
  }
  EXPECT_EQ(constraint->seen, std::vector<int64_t>(ahead.begin(), ahead.end() - 1));
  sampler.commit(ahead[0]);  // kept
  const int64_t other = ahead[1] == 4 ? 7 : 4;  // allowed at position 1, not the draft
  sampler.commit(other);
  EXPECT_EQ(constraint->seen, (std::vector<int64_t>{ahead[0], other}));
  EXPECT_EQ(sampler.best(logits) % 3, 2);
}

}  // namespace
}  // namespace dsv4::runtime

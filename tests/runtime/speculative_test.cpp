// Speculative decoding (runtime/speculative.h, in runtime/batch.h's steps):
//   - the verification rule keeps the model's distribution: with drafts drawn from arbitrary q,
//     the emitted tokens follow p (chi-square against p, fixed seeds, so the test is
//     deterministic; the bound is the chi-square 1e-4 quantile of its degrees of freedom), with
//     temperature, top-k and top-p applied;
//   - greedy generations are token for token those without speculation, on every golden model
//     with a random MTP block (tests/model/mtp_fixture.h), for k = 1 and 4, over generations that
//     cross every compressor's pool steps and the window's wrap-around, with prompts in chunks
//     beside the others' decode steps; logits and logprobs too; a continuation that starts from
//     a speculative sequence's kept state (prefix cache) is also the plain one; sampled hot, so
//     that several drafts a step are kept, each token's logits are those of its prefix; where
//     the batch decides by its step times, steps switch between plain and speculative (the MTP
//     cache skipping ahead) and the greedy tokens stay the plain ones;
//   - the sequences of a batch draft as each alone (their kept rows gathered, sampled tokens and
//     draft counts those of the sequence run alone);
//   - stops (max_tokens inside a step's drafts, the caller's on_token) cut the step's tokens;
//   - constrained sequences (structured outputs) speculate within their constraint: greedy, the
//     tokens of the plain run; sampled hot, every token one the constraint allows where it
//     stands, and the constraint past exactly the emitted tokens (rejected drafts left no trace);
//   - a checkpoint without MTP weights refuses speculation by name.
#include "runtime/speculative.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/loader.h"
#include "model/golden.h"
#include "model/mtp_fixture.h"
#include "runtime/batch.h"
#include "runtime/speculative_batch_fixture.h"
#include "runtime/residue_constraint.h"
#include "testing/compare.h"
#include "testing/tolerance.h"

namespace dsv4::runtime {
namespace {

// ---- The verification rule ----

// χ² of observed counts against probabilities p (cells with p = 0 must stay empty).
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& p) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  double stat = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " has probability 0";
      continue;
    }
    const double expected = p[i] * static_cast<double>(n);
    stat += (static_cast<double>(counts[i]) - expected) * (static_cast<double>(counts[i]) - expected) /
            expected;
  }
  return stat;
}

// softmax(row / T) on the top_k largest, 0 elsewhere: the target written out here.
std::vector<double> target(const std::vector<float>& row, float temperature, size_t top_k) {
  std::vector<size_t> order(row.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return row[a] > row[b]; });
  std::vector<double> p(row.size(), 0.0);
  double sum = 0.0;
  for (size_t i = 0; i < top_k; ++i) sum += p[order[i]] = std::exp(row[order[i]] / temperature);
  for (double& x : p) x /= sum;
  return p;
}

// χ²(df) 1e-4 upper quantiles, df = 1 .. 7.
constexpr double kChiSquare1e4[] = {0, 15.14, 18.42, 21.11, 23.51, 25.74, 27.86, 29.88};

TEST(VerifyDraftsTest, EmittedTokensFollowTheModelWhateverTheDrafts) {
  constexpr size_t kVocab = 8, kTopK = 6;
  constexpr int kTrials = 40000;
  std::mt19937_64 rng(20261206);  // fixed: the test is deterministic
  std::uniform_real_distribution<float> logit(-2.0f, 2.0f);
  std::vector<float> rows(3 * kVocab);
  for (float& x : rows) x = logit(rng);
  // Two drafts from distributions unlike the model's, one of them off its top-k support.
  std::vector<std::vector<double>> q(2, std::vector<double>(kVocab));
  for (auto& qi : q) {
    for (double& x : qi) x = std::uniform_real_distribution<double>(0.05, 1.0)(rng);
    double sum = 0;
    for (double x : qi) sum += x;
    for (double& x : qi) x /= sum;
  }
  SamplingParams params;
  params.temperature = 0.8f;
  params.top_k = kTopK;
  params.seed = 7;
  Sampler sampler(params);
  std::vector<std::vector<int64_t>> counts(3, std::vector<int64_t>(kVocab, 0));
  int64_t n_accepted = 0;
  for (int t = 0; t < kTrials; ++t) {
    const int64_t drafts[2] = {
        std::discrete_distribution<int64_t>(q[0].begin(), q[0].end())(rng),
        std::discrete_distribution<int64_t>(q[1].begin(), q[1].end())(rng)};
    const Verdict v = verify_drafts(drafts, q, rows, sampler);
    ASSERT_GE(v.tokens.size(), 1u);
    ASSERT_EQ(v.tokens.size(), static_cast<size_t>(v.n_accepted) + 1);
    n_accepted += v.n_accepted;
    // Each emitted token at its row: the rows do not depend on the tokens before, so every
    // emitted token i follows row i's target, whatever came before it.
    for (size_t i = 0; i < v.tokens.size(); ++i) ++counts[i][static_cast<size_t>(v.tokens[i])];
  }
  EXPECT_GT(n_accepted, kTrials / 10);  // the rule is exercised both ways
  for (size_t i = 0; i < 3; ++i) {
    const std::vector<float> row(rows.begin() + static_cast<long>(i * kVocab),
                                 rows.begin() + static_cast<long>((i + 1) * kVocab));
    EXPECT_LT(chi_square(counts[i], target(row, params.temperature, kTopK)),
              kChiSquare1e4[kTopK - 1])
        << "row " << i;
  }
}

TEST(VerifyDraftsTest, GreedyKeepsTheLongestMatchingPrefixThenTheModelsToken) {
  Sampler sampler(SamplingParams{});
  // Row argmaxes: 2, 0, 3, 1.
  const std::vector<float> rows = {0, 1, 5, 0, 9, 0, 0, 0, 0, 0, 1, 4, 0, 7, 0, 0};
  const int64_t right[3] = {2, 0, 3};
  Verdict v = verify_drafts(right, {}, rows, sampler);
  EXPECT_EQ(v.tokens, (std::vector<int64_t>{2, 0, 3, 1}));  // all kept, and the bonus
  EXPECT_EQ(v.n_accepted, 3);
  const int64_t wrong_second[3] = {2, 1, 3};
  v = verify_drafts(wrong_second, {}, rows, sampler);
  EXPECT_EQ(v.tokens, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(v.n_accepted, 1);
}

// ---- In the running batch ----

class SpeculativeBatchTest : public SpeculativeBatchFixture {
 protected:
  void SetUp() override { load(Device::kCpu); }
};

TEST_P(SpeculativeBatchTest, GreedyTokensLogitsAndLogprobsAreThoseWithoutSpeculation) {
  std::vector<GenerateRequest> requests = long_greedy_requests();
  requests[1].return_step_logits = true;
  requests[2].logprobs = 2;
  const int64_t v = c().vocab_size;
  expect_plain_tokens(requests, [&](const BatchRun& plain, const BatchRun& spec) {
    const std::vector<float>& want = plain.results[1]->step_logits;
    const std::vector<float>& got = spec.results[1]->step_logits;
    ASSERT_EQ(got.size(), want.size());
    EXPECT_LT(max_row_rel_error(got.data(), want.data(), static_cast<int64_t>(want.size()) / v, v),
              testing::kStepwiseRelTol);
    ASSERT_EQ(spec.results[2]->logprobs.size(), plain.results[2]->logprobs.size());
    for (size_t t = 0; t < plain.results[2]->logprobs.size(); ++t) {
      EXPECT_EQ(spec.results[2]->logprobs[t].token, plain.results[2]->logprobs[t].token);
      EXPECT_NEAR(spec.results[2]->logprobs[t].logprob, plain.results[2]->logprobs[t].logprob,
                  1e-4);
    }
  });
}

// Where the batch decides by its step times (speculate_always off), it speculates in some steps
// and not in others - both kinds first, then retries of the other kind - and the MTP block's
// cache skips ahead over the plain steps' positions each time speculation resumes: the greedy
// tokens stay the plain ones, whichever steps speculated.
TEST_P(SpeculativeBatchTest, StepsThatSwitchBetweenPlainAndSpeculativeKeepTheGreedyTokens) {
  if (c().mtp_layers.front().compress_ratio != 0) GTEST_SKIP() << "a compressed MTP block always speculates";
  std::vector<GenerateRequest> requests;
  for (int64_t n : {5, 23}) requests.push_back(greedy(random_prompt(n), long_generation()));
  const BatchRun plain = run(requests, 0);
  RunningBatch batch(*model_, c().eos_token_id, 16, kPrefixCacheBytes, 2,
                     /*speculate_always=*/false);
  const BatchRun spec = run(requests, 2, &batch);
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSERT_TRUE(plain.results[i].ok() && spec.results[i].ok()) << i;
    EXPECT_EQ(spec.results[i]->tokens, plain.results[i]->tokens) << "sequence " << i;
  }
  // Both kinds of step ran: some verified drafts, fewer than where every step speculates.
  const BatchRun always = run(requests, 2);
  EXPECT_GT(spec.totals.drafted_at.front(), 0);
  EXPECT_LT(spec.totals.drafted_at.front(), always.totals.drafted_at.front());
}

// Sampled hot (a flat distribution, which the random MTP block's drafts often pass), most
// drafts are kept, several a step: every token's logits are still those of its prefix fed in
// one call, so no rejected draft left a trace in any cache.
TEST_P(SpeculativeBatchTest, SampledTokensSeeTheLogitsOfTheirPrefix) {
  GenerateRequest hot = greedy(random_prompt(6), long_generation());
  hot.sampling.temperature = 4.0f;
  hot.sampling.seed = static_cast<uint64_t>(rng_.uniform_int(0, 1 << 30));
  hot.return_step_logits = true;
  const BatchRun spec = run({hot}, 3);
  ASSERT_TRUE(spec.results[0].ok());
  EXPECT_GT(spec.totals.accepted_tokens, spec.totals.drafted_tokens / 4);
  EXPECT_GT(spec.totals.accepted_at[2], 0);  // steps that kept all three drafts
  const std::vector<int64_t>& tokens = spec.results[0]->tokens;
  std::vector<int64_t> fed = hot.prompt;
  fed.insert(fed.end(), tokens.begin(), tokens.end() - 1);
  GenerateRequest forced = greedy(fed, 0);
  forced.return_prompt_logits = true;
  const BatchRun plain = run({forced}, 0);
  ASSERT_TRUE(plain.results[0].ok());
  const int64_t v = c().vocab_size, n_prompt = static_cast<int64_t>(hot.prompt.size());
  const std::vector<float>& want = plain.results[0]->prompt_logits;
  const std::vector<float>& got = spec.results[0]->step_logits;
  ASSERT_EQ(got.size(), tokens.size() * static_cast<size_t>(v));
  EXPECT_LT(max_row_rel_error(got.data(), want.data() + (n_prompt - 1) * v,
                              static_cast<int64_t>(tokens.size()), v),
            testing::kStepwiseRelTol);
}

// Sequences of one batch draft as each would alone. A step's first MTP call takes each
// sequence's kept rows, which its rejected drafts' rows separate from the next sequence's, in one
// gather (model/gather_views.h); a row taken from the wrong place would change that sequence's
// draft distributions and, sampled, its acceptance draws and so its tokens. Sampled hot, so
// that most drafts are kept and the rows kept vary; a step has room for every draft.
TEST_P(SpeculativeBatchTest, SequencesOfABatchDraftAsEachAlone) {
  const int64_t k = 3, roomy = 1024;
  std::vector<GenerateRequest> requests;
  BatchRun all;
  // Rejected drafts are what scatter the kept rows; a draw whose every draft is kept (a tiny
  // model sampled hot can keep all of them) is drawn again with other prompts and seeds.
  for (int draw = 0; draw < 8; ++draw) {
    requests.clear();
    for (int64_t n : {4, 11, 29}) {
      GenerateRequest hot = greedy(random_prompt(n), long_generation());
      hot.sampling.temperature = 4.0f;
      hot.sampling.seed = static_cast<uint64_t>(rng_.uniform_int(0, 1 << 30));
      requests.push_back(std::move(hot));
    }
    RunningBatch together(*model_, c().eos_token_id, roomy, kPrefixCacheBytes, k);
    all = run(requests, k, &together);
    if (all.totals.accepted_tokens < all.totals.drafted_tokens) break;
  }
  EXPECT_GT(all.totals.accepted_tokens, 0);
  EXPECT_LT(all.totals.accepted_tokens, all.totals.drafted_tokens);  // scattered kept rows
  int64_t drafted = 0, accepted = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    RunningBatch one(*model_, c().eos_token_id, roomy, kPrefixCacheBytes, k);
    const BatchRun alone = run({requests[i]}, k, &one);
    ASSERT_TRUE(all.results[i].ok() && alone.results[0].ok()) << i;
    EXPECT_EQ(all.results[i]->tokens, alone.results[0]->tokens) << "sequence " << i;
    drafted += alone.totals.drafted_tokens;
    accepted += alone.totals.accepted_tokens;
  }
  EXPECT_EQ(all.totals.drafted_tokens, drafted);
  EXPECT_EQ(all.totals.accepted_tokens, accepted);
}

// The state a speculative sequence leaves in the prefix cache holds no rejected draft: the
// next turn, started from it, is the plain one.
TEST_P(SpeculativeBatchTest, AContinuationFromAKeptStateIsThePlainOne) {
  const std::vector<int64_t> prompt = random_prompt(70);
  RunningBatch batch(*model_, c().eos_token_id, 16, kPrefixCacheBytes, 3);
  const BatchRun first = run({greedy(prompt, long_generation())}, 3, &batch);
  ASSERT_TRUE(first.results[0].ok());
  std::vector<int64_t> next = prompt;
  next.insert(next.end(), first.results[0]->tokens.begin(), first.results[0]->tokens.end());
  const std::vector<int64_t> more = random_prompt(4);
  next.insert(next.end(), more.begin(), more.end());
  const BatchRun second = run({greedy(next, 20)}, 3, &batch);
  EXPECT_GT(second.totals.cached_prompt_tokens, 0);
  const BatchRun plain = run({greedy(next, 20)}, 0);
  ASSERT_TRUE(second.results[0].ok() && plain.results[0].ok());
  EXPECT_EQ(second.results[0]->tokens, plain.results[0]->tokens);
}

TEST_P(SpeculativeBatchTest, StopsInsideAStepCutItsTokens) {
  GenerateRequest capped = greedy(random_prompt(9), 2);  // fewer than k + 1
  GenerateRequest stopped = greedy(random_prompt(9), 50);
  int n_seen = 0;
  stopped.on_token = [&n_seen](int64_t) { return ++n_seen < 5; };
  const BatchRun spec = run({capped, stopped}, 4);
  ASSERT_TRUE(spec.results[0].ok() && spec.results[1].ok());
  EXPECT_EQ(spec.results[0]->tokens.size(), 2u);
  EXPECT_EQ(spec.results[1]->tokens.size(), 5u);
  EXPECT_TRUE(spec.results[1]->stopped_by_caller);
  const BatchRun plain = run({capped, greedy(stopped.prompt, 5)}, 0);
  EXPECT_EQ(spec.results[0]->tokens, plain.results[0]->tokens);
  EXPECT_EQ(spec.results[1]->tokens, plain.results[1]->tokens);
}

// Constrained sequences speculate: their drafts are drawn within the constraint at their own
// positions, verified within it, and a rejected draft leaves no trace in it. Greedy, the tokens
// are those without speculation; sampled hot (so that masks at a wrong position would let a
// wrong token through), every token is one the constraint allows where it stands.
TEST_P(SpeculativeBatchTest, ConstrainedSequencesSpeculateWithinTheirConstraint) {
  const auto constraint = std::make_shared<testing::ResidueConstraint>(c().vocab_size);
  GenerateRequest held = greedy(random_prompt(6), long_generation());
  held.sampling.constraint = constraint;
  GenerateRequest hot = held;
  hot.prompt = random_prompt(5);
  hot.sampling.temperature = 4.0f;
  hot.sampling.seed = static_cast<uint64_t>(rng_.uniform_int(0, 1 << 30));
  const BatchRun plain = run({held}, 0);
  const BatchRun spec = run({held, hot}, 3);
  ASSERT_TRUE(plain.results[0].ok() && spec.results[0].ok() && spec.results[1].ok());
  EXPECT_EQ(spec.results[0]->tokens, plain.results[0]->tokens);
  EXPECT_GT(spec.totals.drafted_tokens, 0);
  // Second drafts are kept too: drawn at the position past the first (at the first's position
  // they would break the constraint two times in three, and never be kept).
  EXPECT_GT(spec.totals.accepted_at[1], 0);
  const std::vector<int64_t>& sampled = spec.results[1]->tokens;
  ASSERT_EQ(static_cast<int64_t>(sampled.size()), long_generation());
  EXPECT_TRUE(testing::ResidueConstraint::allows(sampled));
  // The states (plain's, then the two of the speculative run) stand past their tokens exactly:
  // each draft rolled back is gone.
  const std::vector<std::vector<int64_t>> histories = constraint->histories();
  ASSERT_EQ(histories.size(), 3u);
  EXPECT_EQ(histories[1], spec.results[0]->tokens);
  EXPECT_EQ(histories[2], sampled);
}

INSTANTIATE_TEST_SUITE_P(Golden, SpeculativeBatchTest,
                         ::testing::Values("tiny_a_state_dict", "tiny_b_state_dict",
                                           "tiny_c_pretrained", "tiny_d_state_dict",
                                           "tiny_e_pretrained"));

TEST(SpeculativeEngineTest, ACheckpointWithoutMtpWeightsRefusesSpeculation) {
  const std::string model = testing::golden_path("tiny_a_pretrained/model");
  const Result<Engine> engine = Engine::open({.model_dir = model, .speculative_tokens = 2});
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.status().message(), "speculative decoding (2 tokens) needs the checkpoint's MTP "
                                       "block, and " +
                                           model + " has none (no mtp.* tensors)");
  const Result<Engine> too_many = Engine::open({.model_dir = model, .speculative_tokens = 5});
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.status().message(), "speculative_tokens (5) must be in [0, 4]");
}

}  // namespace
}  // namespace dsv4::runtime

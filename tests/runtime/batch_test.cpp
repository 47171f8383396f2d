// The running batch (runtime/batch.h) on the oracle's tiny_e (sliding and HCA layers) and tiny_d
// (CSA layers, the indexer's sparse selection): sequences that join at different steps, so that
// one step prefills a prompt beside the others' decode tokens, each come out as transformers'
// cached greedy continuation (tiny_e's prompt 1 ends at eos, before max_tokens), with prompts
// whole or in chunks of a few tokens; a prompt in chunks gives transformers' prompt logits and
// logprobs; a sequence leaves the step it is done; max_tokens 0 runs the prompt alone.
#include "runtime/batch.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/loader.h"
#include "runtime/golden_cases.h"
#include "testing/compare.h"
#include "testing/tolerance.h"

namespace dsv4::runtime {
namespace {

constexpr int64_t kWholePrompts = 2048;  // more than any golden prompt and its decode tokens
constexpr int64_t kPrefixCacheBytes = int64_t{64} << 20;  // on, as in the engine

class RunningBatchTest : public ::testing::Test {
 protected:
  explicit RunningBatchTest(int64_t step_tokens = kWholePrompts,
                            const std::string& folder = "tiny_e_pretrained")
      : loaded_(checkpoint::load_model(testing::golden_path(folder + "/model")).value()),
        model_(loaded_.weights, model::ModelOptions{}),
        batch_(model_, model_.config().eos_token_id, step_tokens, kPrefixCacheBytes) {}

  // Admits `request`; its result lands in results_[index].
  void admit(const GenerateRequest& request, size_t index) {
    if (results_.size() <= index) results_.resize(index + 1);
    const Status admitted = batch_.admit(request, [this, index](Result<Generation> r) {
      EXPECT_FALSE(results_[index].has_value()) << "on_done twice for " << index;
      results_[index] = std::move(r);
    });
    ASSERT_TRUE(admitted.ok()) << admitted.to_string();
  }

  checkpoint::LoadedModel loaded_;
  model::Model model_;
  RunningBatch batch_;
  std::vector<std::optional<Result<Generation>>> results_;
};

struct Chunking {
  const char* folder;
  int64_t step_tokens;
};

// Prompts whole, or fed 3 or 4 tokens a step beside the decode tokens (3 is the least that lets
// three sequences progress).
class ChunkedBatchTest : public RunningBatchTest, public ::testing::WithParamInterface<Chunking> {
 protected:
  ChunkedBatchTest() : RunningBatchTest(GetParam().step_tokens, GetParam().folder) {}
};

TEST_P(ChunkedBatchTest, SequencesJoiningAtAnyStepGiveTransformersGreedyTokens) {
  const std::vector<testing::GoldenCase> cases = testing::golden_cases(GetParam().folder);
  ASSERT_EQ(cases.size(), 3u);
  const auto request = [&](size_t i) {
    GenerateRequest r{cases[i].prompt, {}};
    r.sampling.max_tokens = static_cast<int64_t>(cases[i].greedy.size());
    return r;
  };
  admit(request(0), 0);
  for (int s = 0; s < 3; ++s) batch_.step();
  admit(request(1), 1);
  batch_.step();
  EXPECT_EQ(batch_.size(), 2u);
  admit(request(2), 2);
  for (int s = 0; s < 1000 && !batch_.empty(); ++s) batch_.step();
  ASSERT_TRUE(batch_.empty());
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(results_[i].has_value() && results_[i]->ok()) << i;
    const Generation& g = **results_[i];
    EXPECT_EQ(g.tokens, cases[i].greedy) << i;
    EXPECT_EQ(g.stopped_at_eos, cases[i].greedy.back() == model_.config().eos_token_id) << i;
    EXPECT_EQ(g.token_times.size(), g.tokens.size()) << i;
    EXPECT_TRUE(std::is_sorted(g.token_times.begin(), g.token_times.end())) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, ChunkedBatchTest,
                         ::testing::Values(Chunking{"tiny_e_pretrained", kWholePrompts},
                                           Chunking{"tiny_e_pretrained", 4},
                                           Chunking{"tiny_e_pretrained", 3},
                                           Chunking{"tiny_d_state_dict", kWholePrompts},
                                           Chunking{"tiny_d_state_dict", 3}),
                         [](const auto& p) {
                           return std::string(p.param.folder) + "_step_tokens_" +
                                  std::to_string(p.param.step_tokens);
                         });

TEST_F(RunningBatchTest, TinyEsSecondPromptEndsAtEos) {
  const std::vector<testing::GoldenCase> cases = testing::golden_cases("tiny_e_pretrained");
  ASSERT_EQ(cases[1].greedy.back(), model_.config().eos_token_id);
  GenerateRequest r{cases[1].prompt, {}};
  r.sampling.max_tokens = 40;
  admit(r, 0);
  for (int s = 0; s < 100 && !batch_.empty(); ++s) batch_.step();
  ASSERT_TRUE(results_[0].has_value() && results_[0]->ok());
  EXPECT_EQ((*results_[0])->tokens, cases[1].greedy);
  EXPECT_TRUE((*results_[0])->stopped_at_eos);
}

class FourTokensAStepTest : public RunningBatchTest {
 protected:
  FourTokensAStepTest() : RunningBatchTest(4) {}
};

TEST_F(FourTokensAStepTest, APromptLongerThanAStepRunsInChunksToTransformersLogits) {
  const auto ref = testing::open_golden("tiny_e_pretrained/reference.safetensors");
  const Tensor prompt = testing::golden_tensor(ref, "prompt_0");
  const Tensor want = testing::golden_tensor(ref, "logits_0");
  const int64_t n = prompt.numel(), v = model_.config().vocab_size;
  GenerateRequest r{{prompt.data_as<int64_t>(), prompt.data_as<int64_t>() + n}, {.max_tokens = 1}};
  r.return_prompt_logits = true;
  admit(r, 0);
  int steps = 0;
  for (; steps < 100 && !batch_.empty(); ++steps) batch_.step();
  EXPECT_EQ(steps, (n + 3) / 4) << "4 prompt tokens a step, the token drawn in the last";
  ASSERT_TRUE(results_[0].has_value() && results_[0]->ok());
  const Generation& g = **results_[0];
  ASSERT_EQ(g.prompt_logits.size(), static_cast<size_t>(n * v));
  EXPECT_LT(testing::max_row_rel_error(g.prompt_logits.data(), want.data_as<float>(), n, v),
            testing::kGoldenLogitsRelTol);
  EXPECT_EQ(g.tokens.size(), 1u);
}

// Log-softmax of transformers' logits rows, in double: the reference for logprobs.
double golden_logprob(const Tensor& logits, int64_t row, int64_t token) {
  const int64_t v = logits.shape()[logits.shape().rank - 1];
  const float* r = logits.data_as<float>() + row * v;
  double sum = 0;
  for (int64_t i = 0; i < v; ++i) sum += std::exp(static_cast<double>(r[i]));
  return r[token] - std::log(sum);
}

// Prompt logprobs from chunks of 4 (rows that straddle chunk ends) and the greedy tokens'
// logprobs, against the log-softmax of transformers' own logits for the prompt and for each
// greedy step; greedy tokens are their position's most likely.
TEST_F(FourTokensAStepTest, LogprobsAreTransformersLogSoftmax) {
  const auto ref = testing::open_golden("tiny_e_pretrained/reference.safetensors");
  const Tensor prompt = testing::golden_tensor(ref, "prompt_0");
  const Tensor greedy = testing::golden_tensor(ref, "greedy_0");
  const Tensor prompt_logits = testing::golden_tensor(ref, "logits_0");
  const Tensor greedy_logits = testing::golden_tensor(ref, "greedy_logits_0");
  const int64_t n = prompt.numel(), m = std::min<int64_t>(greedy.numel(), 5);
  GenerateRequest r{{prompt.data_as<int64_t>(), prompt.data_as<int64_t>() + n}, {.max_tokens = m}};
  r.logprobs = 3;
  r.prompt_logprobs = true;
  admit(r, 0);
  for (int s = 0; s < 100 && !batch_.empty(); ++s) batch_.step();
  ASSERT_TRUE(results_[0].has_value() && results_[0]->ok());
  const Generation& g = **results_[0];
  ASSERT_EQ(g.prompt_logprobs.size(), static_cast<size_t>(n - 1));
  for (int64_t p = 1; p < n; ++p) {
    const TokenLogprob& lp = g.prompt_logprobs[static_cast<size_t>(p - 1)];
    EXPECT_EQ(lp.token, r.prompt[static_cast<size_t>(p)]);
    EXPECT_NEAR(lp.logprob, golden_logprob(prompt_logits, p - 1, lp.token), 1e-4)
        << "position " << p;
    ASSERT_EQ(lp.top.size(), 3u);
  }
  ASSERT_EQ(g.logprobs.size(), static_cast<size_t>(m));
  for (int64_t j = 0; j < m; ++j) {
    const TokenLogprob& lp = g.logprobs[static_cast<size_t>(j)];
    EXPECT_EQ(lp.token, greedy.data_as<int64_t>()[j]);
    EXPECT_NEAR(lp.logprob, golden_logprob(greedy_logits, j, lp.token), 1e-4) << "token " << j;
    ASSERT_FALSE(lp.top.empty());
    EXPECT_EQ(lp.top[0].first, lp.token) << "a greedy token is its position's most likely";
    EXPECT_EQ(lp.top[0].second, lp.logprob);
  }
}

TEST_F(RunningBatchTest, ASequenceLeavesTheStepItIsDone) {
  GenerateRequest two{{3, 4, 5}, {.max_tokens = 2, .stop_at_eos = false}};
  GenerateRequest five{{6, 7}, {.max_tokens = 5, .stop_at_eos = false}};
  admit(two, 0);
  admit(five, 1);
  batch_.step();  // both prompts; each draws its first token
  EXPECT_EQ(batch_.size(), 2u);
  batch_.step();  // `two` draws its second and leaves
  EXPECT_EQ(batch_.size(), 1u);
  ASSERT_TRUE(results_[0].has_value() && results_[0]->ok());
  EXPECT_EQ((*results_[0])->tokens.size(), 2u);
  EXPECT_FALSE(results_[1].has_value());
  for (int s = 0; s < 3; ++s) batch_.step();
  EXPECT_TRUE(batch_.empty());
  ASSERT_TRUE(results_[1].has_value() && results_[1]->ok());
  EXPECT_EQ((*results_[1])->tokens.size(), 5u);
}

TEST_F(RunningBatchTest, MaxTokensZeroRunsThePromptAlone) {
  GenerateRequest r{{3, 4, 5}, {.max_tokens = 0}};
  r.return_prompt_logits = true;
  admit(r, 0);
  batch_.step();
  EXPECT_TRUE(batch_.empty());
  ASSERT_TRUE(results_[0].has_value() && results_[0]->ok());
  EXPECT_TRUE((*results_[0])->tokens.empty());
  EXPECT_EQ((*results_[0])->prompt_logits.size(),
            3u * static_cast<size_t>(model_.config().vocab_size));
}

}  // namespace
}  // namespace dsv4::runtime

// The running batch (runtime/batch.h) on the oracle's tiny_e: sequences that join at different
// steps, so that one step prefills a prompt beside the others' decode tokens, each come out as
// transformers' cached greedy continuation (tiny_e's prompt 1 ends at eos, before max_tokens);
// a sequence leaves the step it is done; max_tokens 0 runs the prompt alone.
#include "runtime/batch.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "checkpoint/loader.h"
#include "runtime/golden_cases.h"

namespace dsv4::runtime {
namespace {

class RunningBatchTest : public ::testing::Test {
 protected:
  RunningBatchTest()
      : loaded_(checkpoint::load_model(testing::golden_path("tiny_e_pretrained/model")).value()),
        model_(loaded_.weights, model::ModelOptions{}),
        batch_(model_, model_.config().eos_token_id) {}

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

TEST_F(RunningBatchTest, SequencesJoiningAtAnyStepGiveTransformersGreedyTokens) {
  const std::vector<testing::GoldenCase> cases = testing::golden_cases("tiny_e_pretrained");
  ASSERT_EQ(cases.size(), 3u);
  const auto request = [&](size_t i) {
    GenerateRequest r{cases[i].prompt, {}};
    r.sampling.max_tokens = 20;
    return r;
  };
  admit(request(0), 0);
  for (int s = 0; s < 3; ++s) batch_.step();
  admit(request(1), 1);
  batch_.step();
  EXPECT_EQ(batch_.size(), 2u);
  admit(request(2), 2);
  for (int s = 0; s < 40 && !batch_.empty(); ++s) batch_.step();
  ASSERT_TRUE(batch_.empty());
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(results_[i].has_value() && results_[i]->ok()) << i;
    const Generation& g = **results_[i];
    EXPECT_EQ(g.tokens, cases[i].greedy) << i;
    EXPECT_EQ(g.stopped_at_eos, cases[i].greedy.back() == model_.config().eos_token_id) << i;
    EXPECT_EQ(g.token_times.size(), g.tokens.size()) << i;
    EXPECT_TRUE(std::is_sorted(g.token_times.begin(), g.token_times.end())) << i;
  }
  EXPECT_TRUE((*results_[1])->stopped_at_eos) << "tiny_e's prompt 1 ends at eos";
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

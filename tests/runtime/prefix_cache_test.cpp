// Prefix caching: the store (runtime/prefix_cache.h: longest prefix, byte budget, least recently
// used out first) and the running batch that uses it (runtime/batch.h) on tiny_a (sliding, CSA
// and HCA layers): the same prompt again, a chat's next turn after the reply, a prompt whose end
// differs, one that shares only a long start and a third with the start two others shared each
// start from a kept state and give the tokens and logits of a batch without the cache; requests
// that want every prompt row compute them all.
#include "runtime/prefix_cache.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "checkpoint/loader.h"
#include "model/golden.h"
#include "runtime/batch.h"
#include "testing/compare.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4::runtime {
namespace {

// A state of `bytes` bytes (a multiple of 4): one layer whose window holds them.
model::SequenceCache state_of(int64_t bytes) {
  model::SequenceCache state;
  state.layers.emplace_back();
  state.layers.back().window = Tensor::host(DType::kF32, {bytes / 4, 1});
  return state;
}

TEST(PrefixCacheTest, FindsTheLongestKeptPrefixShorterThanThePrompt) {
  PrefixCache cache(1 << 20);
  EXPECT_EQ(cache.match(std::vector<int64_t>{1, 2, 3}).kept, nullptr);
  cache.insert({1, 2}, state_of(64));
  cache.insert({1, 2, 3, 4}, state_of(64));
  cache.insert({1, 9, 3}, state_of(64));
  cache.insert({1, 2, 3, 4, 5}, state_of(64));
  const PrefixCache::Entry* hit = cache.match(std::vector<int64_t>{1, 2, 3, 4, 5}).kept;
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->tokens, (std::vector<int64_t>{1, 2, 3, 4})) << "the same tokens leave none to run";
  hit = cache.match(std::vector<int64_t>{1, 2, 3}).kept;
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->tokens, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(cache.match(std::vector<int64_t>{2, 1, 2, 3}).kept, nullptr);
  EXPECT_TRUE(cache.contains(std::vector<int64_t>{1, 9, 3}));
  EXPECT_FALSE(cache.contains(std::vector<int64_t>{1, 9}));
  // Where a prompt branches off the kept tokens, found in the same pass.
  EXPECT_EQ(cache.match(std::vector<int64_t>{1, 2, 3, 7}).common, 3);
  EXPECT_EQ(cache.match(std::vector<int64_t>{1, 9, 3, 4, 5}).common, 3);
  EXPECT_EQ(cache.match(std::vector<int64_t>{1, 2}).common, 2);
  EXPECT_EQ(cache.match(std::vector<int64_t>{5}).common, 0);
}

TEST(PrefixCacheTest, KeepsWithinItsBytesDroppingTheLeastRecentlyUsed) {
  PrefixCache cache(300);
  cache.insert({1}, state_of(100));
  cache.insert({2}, state_of(100));
  cache.insert({3}, state_of(100));
  EXPECT_EQ(cache.bytes(), 300);
  ASSERT_NE(cache.match(std::vector<int64_t>{1, 7}).kept, nullptr);  // {1} used: {2} is last
  cache.insert({4}, state_of(100));
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_FALSE(cache.contains(std::vector<int64_t>{2}));
  EXPECT_TRUE(cache.contains(std::vector<int64_t>{1}));

  cache.insert({4}, state_of(200));  // the same tokens again: replaced, not counted twice
  EXPECT_EQ(cache.bytes(), 300);
  EXPECT_EQ(cache.size(), 2u);
  cache.insert({5}, state_of(400));  // more than the whole budget: not kept, nothing dropped
  EXPECT_FALSE(cache.contains(std::vector<int64_t>{5}));
  EXPECT_EQ(cache.size(), 2u);
  cache.clear();
  EXPECT_EQ(cache.bytes(), 0);
  EXPECT_EQ(cache.size(), 0u);

  PrefixCache off(0);
  EXPECT_FALSE(off.enabled());
  off.insert({1}, state_of(4));
  EXPECT_EQ(off.size(), 0u);
}

class PrefixCachingBatchTest : public ::testing::Test {
 protected:
  PrefixCachingBatchTest()
      : loaded_(checkpoint::load_model(testing::golden_path("tiny_a_state_dict/model")).value()),
        model_(loaded_.weights, model::ModelOptions{}),
        cached_(model_, model_.config().eos_token_id, kStepTokens, int64_t{64} << 20),
        uncached_(model_, model_.config().eos_token_id, kStepTokens, 0) {}

  static constexpr int64_t kStepTokens = 512;

  std::vector<int64_t> random_tokens(int64_t n) {
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (int64_t& id : ids) id = rng_.uniform_int(0, model_.config().vocab_size - 1);
    return ids;
  }

  static GenerateRequest request(std::vector<int64_t> prompt, int64_t max_tokens) {
    GenerateRequest r{std::move(prompt), {.max_tokens = max_tokens, .stop_at_eos = false}};
    r.return_step_logits = true;
    return r;
  }

  // `request` alone in `batch`, stepped until it is done.
  static Generation run(RunningBatch& batch, const GenerateRequest& request) {
    std::optional<Result<Generation>> out;
    const Status admitted = batch.admit(request, [&](Result<Generation> r) { out = std::move(r); });
    EXPECT_TRUE(admitted.ok()) << admitted.to_string();
    for (int s = 0; s < 1000 && !batch.empty(); ++s) batch.step();
    EXPECT_TRUE(out.has_value() && out->ok());
    return out.has_value() && out->ok() ? std::move(*out).value() : Generation{};
  }

  // Runs `r` through both batches: the same tokens, the logits up to the steps' chunking.
  Generation run_both(const GenerateRequest& r) {
    const Generation cached = run(cached_, r), uncached = run(uncached_, r);
    EXPECT_EQ(cached.tokens, uncached.tokens);
    const auto v = model_.config().vocab_size;
    EXPECT_EQ(cached.step_logits.size(), uncached.step_logits.size());
    EXPECT_LT(testing::max_row_rel_error(cached.step_logits.data(), uncached.step_logits.data(),
                                         static_cast<int64_t>(cached.tokens.size()), v),
              testing::kStepwiseRelTol);
    return cached;
  }

  int64_t cached_tokens() const { return cached_.totals().cached_prompt_tokens; }

  testing::SeededRng rng_;
  checkpoint::LoadedModel loaded_;
  model::Model model_;
  RunningBatch cached_, uncached_;
};

TEST_F(PrefixCachingBatchTest, PromptsStartFromKeptStatesAndGiveTheUncachedNumbers) {
  const std::vector<int64_t> prompt = random_tokens(80);
  const Generation first = run_both(request(prompt, 6));
  EXPECT_EQ(cached_tokens(), 0);
  EXPECT_GT(cached_.totals().prefix_cache_bytes, 0);

  // The same prompt again: from the state after all but its last token (kept inside the first
  // run's forward), that token alone; run_both compares it with the uncached batch.
  const Generation again = run_both(request(prompt, 6));
  EXPECT_EQ(cached_tokens(), 79);
  EXPECT_EQ(again.tokens, first.tokens);

  // The next turn of a chat: prompt, reply, more; from the state after the reply but its last
  // token.
  std::vector<int64_t> next_turn = prompt;
  next_turn.insert(next_turn.end(), first.tokens.begin(), first.tokens.end());
  const std::vector<int64_t> more = random_tokens(12);
  next_turn.insert(next_turn.end(), more.begin(), more.end());
  run_both(request(next_turn, 5));
  EXPECT_EQ(cached_tokens(), 79 + 85);

  // A prompt whose last tokens differ: from the state after all but the first prompt's last.
  std::vector<int64_t> other_end(prompt.begin(), prompt.end() - 1);
  const std::vector<int64_t> end = random_tokens(3);
  other_end.insert(other_end.end(), end.begin(), end.end());
  run_both(request(other_end, 4));
  EXPECT_EQ(cached_tokens(), 79 + 85 + 79);

  // Differing early, or short of every kept state: computed whole.
  std::vector<int64_t> early(prompt.begin(), prompt.begin() + 40);
  early.push_back(prompt[40] + 1 == model_.config().vocab_size ? 0 : prompt[40] + 1);
  run_both(request(early, 3));
  EXPECT_EQ(cached_tokens(), 79 + 85 + 79);
}

// A prompt of 1200 tokens runs in chunks ending at 512, 1024 and 1199: the state at 1024 is kept
// (kKeptSpacing past none), not the one at 512.
TEST_F(PrefixCachingBatchTest, APromptSharingALongStartStartsFromAStateAlongTheOther) {
  static_assert(RunningBatch::kKeptSpacing == 2 * kStepTokens);
  const std::vector<int64_t> first = random_tokens(1200);
  run_both(request(first, 2));
  std::vector<int64_t> second(first.begin(), first.begin() + 1100);
  const std::vector<int64_t> question = random_tokens(30);
  second.insert(second.end(), question.begin(), question.end());
  run_both(request(second, 3));
  EXPECT_EQ(cached_tokens(), 1024);
  std::vector<int64_t> shorter(first.begin(), first.begin() + 1000);
  shorter.push_back(0);
  run_both(request(shorter, 2));
  EXPECT_EQ(cached_tokens(), 1024) << "no state at 512";
}

// Three prompts of one 300-token start and different questions: the second branches off the
// first's kept states at 300, where its chunk ends and its state is kept; the third starts there.
TEST_F(PrefixCachingBatchTest, TheStartTwoPromptsShareIsKeptForAThird) {
  const std::vector<int64_t> start = random_tokens(300);
  const auto asking = [&](int64_t first_token) {
    std::vector<int64_t> prompt = start;
    prompt.push_back(first_token);  // the questions differ from their first token
    const std::vector<int64_t> question = random_tokens(20);
    prompt.insert(prompt.end(), question.begin(), question.end());
    return prompt;
  };
  run_both(request(asking(1), 2));
  run_both(request(asking(2), 2));
  EXPECT_EQ(cached_tokens(), 0);
  run_both(request(asking(3), 2));
  EXPECT_EQ(cached_tokens(), 300);
}

// A request's n choices, admitted together: one computes the prompt, the others wait for its
// kept state and compute the last prompt token alone; each draws what it draws without the
// cache.
TEST_F(PrefixCachingBatchTest, ChoicesOfOnePromptComputeItOnce) {
  const std::vector<int64_t> prompt = random_tokens(100);
  const auto all = [&](RunningBatch& batch) {
    std::vector<std::optional<Result<Generation>>> out(3);
    for (size_t i = 0; i < out.size(); ++i) {
      GenerateRequest r = request(prompt, 4);
      r.sampling.temperature = 1.0f;
      r.sampling.seed = i;
      EXPECT_TRUE(batch.admit(r, [&out, i](Result<Generation> g) { out[i] = std::move(g); }).ok());
    }
    for (int s = 0; s < 100 && !batch.empty(); ++s) batch.step();
    std::vector<std::vector<int64_t>> tokens;
    for (auto& g : out)
      tokens.push_back(g.has_value() && g->ok() ? (*g)->tokens : std::vector<int64_t>{});
    return tokens;
  };
  const auto cached = all(cached_), uncached = all(uncached_);
  EXPECT_EQ(cached, uncached);
  EXPECT_EQ(cached[0].size(), 4u);
  EXPECT_EQ(cached_tokens(), 2 * 99);
  EXPECT_EQ(cached_.totals().prompt_tokens, 99 + 3);
  EXPECT_EQ(uncached_.totals().prompt_tokens, 3 * 100);
}

TEST_F(PrefixCachingBatchTest, RequestsForEveryPromptRowComputeThemAll) {
  const std::vector<int64_t> prompt = random_tokens(70);
  run_both(request(prompt, 2));
  GenerateRequest rows = request(prompt, 2);
  rows.return_prompt_logits = true;
  const Generation cached = run(cached_, rows), uncached = run(uncached_, rows);
  EXPECT_EQ(cached_tokens(), 0);
  const auto v = model_.config().vocab_size;
  ASSERT_EQ(cached.prompt_logits.size(), prompt.size() * static_cast<size_t>(v));
  EXPECT_LT(testing::max_row_rel_error(cached.prompt_logits.data(), uncached.prompt_logits.data(),
                                       static_cast<int64_t>(prompt.size()), v),
            testing::kStepwiseRelTol);
}

}  // namespace
}  // namespace dsv4::runtime

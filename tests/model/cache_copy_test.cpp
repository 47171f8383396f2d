// Prefix caching's model side (model/cache_copy.h): a sequence continued from a copy of another's
// state gives the logits of the sequence run without a break, whether the copy went through a
// compact snapshot or straight into a cache of another size, for prompts shorter and longer than
// the window, ending inside a compressor block or on its edge; bad copies are refused untouched.
#include "model/cache_copy.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "checkpoint/loader.h"
#include "model/deepseek_v4.h"
#include "model/golden.h"
#include "testing/compare.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4::model {
namespace {

using testing::max_row_rel_error;

// tiny_a: sliding, CSA (m = 4, with the indexer) and HCA (m = 16) layers, window 16.
class CacheCopyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto loaded = checkpoint::load_model(testing::golden_path("tiny_a_state_dict/model"));
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    loaded_ = std::move(loaded).value();
    model_ = std::make_unique<Model>(loaded_.weights, ModelOptions{});
  }

  std::vector<int64_t> random_tokens(int64_t n) {
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (int64_t& id : ids) id = rng_.uniform_int(0, model_->config().vocab_size - 1);
    return ids;
  }

  // Every row's logits of `tokens` fed to `cache` in one call.
  Tensor run(const std::vector<int64_t>& tokens, SequenceCache& cache) {
    const auto n = static_cast<int64_t>(tokens.size());
    Tensor logits = Tensor::host(DType::kF32, {n, model_->config().vocab_size});
    const Status ran = model_->forward(tokens, cache.n_tokens(), cache, logits.view());
    EXPECT_TRUE(ran.ok()) << ran.to_string();
    return logits;
  }

  SequenceCache cache(int64_t max_positions,
                      int64_t step_tokens = AttentionCache::kDefaultStepTokens) {
    auto c = model_->new_cache(max_positions, step_tokens);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return std::move(c).value();
  }

  testing::SeededRng rng_;
  checkpoint::LoadedModel loaded_;
  std::unique_ptr<Model> model_;
};

TEST_F(CacheCopyTest, ContinuingACopiedStateGivesTheUnbrokenSequencesLogits) {
  const int64_t v = model_->config().vocab_size;
  // Prefix lengths: inside the first CSA block, one window exactly, past the window ending
  // mid-block, on an HCA block edge; continuations of one token to more than a window.
  for (const auto& [n_prefix, n_rest] :
       std::vector<std::pair<int64_t, int64_t>>{{3, 2}, {16, 1}, {37, 9}, {64, 21}}) {
    SCOPED_TRACE("prefix " + std::to_string(n_prefix) + ", then " + std::to_string(n_rest));
    const std::vector<int64_t> prefix = random_tokens(n_prefix), rest = random_tokens(n_rest);
    SequenceCache unbroken = cache(128);
    run(prefix, unbroken);
    const Tensor want = run(rest, unbroken);

    SequenceCache first = cache(n_prefix + 1);
    run(prefix, first);
    auto snapshot = snapshot_cache(*model_, first);
    ASSERT_TRUE(snapshot.ok()) << snapshot.status().to_string();
    EXPECT_EQ(snapshot->n_tokens(), n_prefix);
    EXPECT_LT(cache_bytes(*snapshot), cache_bytes(first));

    // Through the snapshot into a cache of the same steps: the same floats, bit for bit.
    SequenceCache resumed = cache(n_prefix + n_rest + 7);
    ASSERT_TRUE(copy_cache_state(*snapshot, resumed).ok());
    const Tensor got = run(rest, resumed);
    EXPECT_EQ(max_row_rel_error(got.data_as<float>(), want.data_as<float>(), n_rest, v), 0.0);

    // Straight from the first cache into one of 3-token steps (another ring size): the same
    // numbers up to the GEMMs' blocking.
    SequenceCache stepped = cache(n_prefix + n_rest, 3);
    ASSERT_TRUE(copy_cache_state(first, stepped).ok());
    const Tensor got_stepped = run(rest, stepped);
    EXPECT_LT(max_row_rel_error(got_stepped.data_as<float>(), want.data_as<float>(), n_rest, v),
              testing::kStepwiseRelTol);
  }
}

// A snapshot taken inside a forward (SequenceChunk::snapshot) is the state after its first
// tokens: continuing from it gives the logits of the sequence that ran only those, then more.
// The chunk runs beside another sequence (one batched step), or alone in steps of 8 tokens with
// the snapshot's position inside a step or on a step's end; the other sequence's logits are its
// own run's.
TEST_F(CacheCopyTest, ASnapshotInsideAForwardIsTheStateAfterItsFirstTokens) {
  const int64_t v = model_->config().vocab_size;
  for (const auto& [n_prefix, step_tokens, beside] :
       std::vector<std::tuple<int64_t, int64_t, bool>>{
           {37, AttentionCache::kDefaultStepTokens, true}, {37, 8, false}, {32, 8, false}}) {
    SCOPED_TRACE("prefix " + std::to_string(n_prefix) + ", steps of " +
                 std::to_string(step_tokens) + (beside ? ", beside another" : ""));
    const std::vector<int64_t> prefix = random_tokens(n_prefix), rest = random_tokens(9);
    SequenceCache unbroken = cache(64);
    run(prefix, unbroken);
    const Tensor want = run(rest, unbroken);

    std::vector<int64_t> chunk = prefix;
    chunk.push_back(random_tokens(1)[0]);
    const std::vector<int64_t> other = random_tokens(20);
    SequenceCache other_alone = cache(64);
    const Tensor other_want = run(other, other_alone);

    SequenceCache ran = cache(64, step_tokens), other_ran = cache(64, step_tokens);
    auto snapshot = empty_snapshot(*model_, n_prefix);
    ASSERT_TRUE(snapshot.ok()) << snapshot.status().to_string();
    Tensor logits = Tensor::host(DType::kF32, {1, v}),
           other_logits = Tensor::host(DType::kF32, {1, v});
    std::vector<SequenceChunk> chunks{{chunk, 0, &ran, logits.view(), &*snapshot, n_prefix}};
    if (beside) chunks.push_back({other, 0, &other_ran, other_logits.view()});
    ASSERT_TRUE(model_->forward(chunks).ok());
    EXPECT_EQ(ran.n_tokens(), n_prefix + 1);
    EXPECT_EQ(snapshot->n_tokens(), n_prefix);
    if (beside) {
      EXPECT_LT(max_row_rel_error(other_logits.data_as<float>(),
                                  other_want.data_as<float>() + (other.size() - 1) * v, 1, v),
                testing::kStepwiseRelTol);
    }
    SequenceCache resumed = cache(64);
    ASSERT_TRUE(copy_cache_state(*snapshot, resumed).ok());
    const Tensor got = run(rest, resumed);
    EXPECT_LT(max_row_rel_error(got.data_as<float>(), want.data_as<float>(), 9, v),
              testing::kStepwiseRelTol);
  }
}

TEST_F(CacheCopyTest, CopiesThatCannotHoldTheStateAreRefusedUntouched) {
  SequenceCache first = cache(64);
  run(random_tokens(40), first);
  SequenceCache small = cache(39);
  const Status too_small = copy_cache_state(first, small);
  EXPECT_EQ(too_small.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_small.message().find("40 tokens into a cache of 39 positions"), std::string::npos)
      << too_small.message();
  EXPECT_EQ(small.n_tokens(), 0);

  // Layers swapped: a sliding layer's cache has no compressor.
  SequenceCache swapped = cache(64);
  std::swap(swapped.layers[0], swapped.layers[2]);
  const Status other_layers = copy_cache_state(first, swapped);
  EXPECT_EQ(other_layers.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(other_layers.message().find("compressor in one cache and not the other"),
            std::string::npos)
      << other_layers.message();
  for (const AttentionCache& layer : swapped.layers) EXPECT_EQ(layer.n_tokens, 0);

  SequenceCache fewer = cache(64);
  fewer.layers.pop_back();
  EXPECT_EQ(copy_cache_state(first, fewer).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace dsv4::model

// Speculative decoding's rollback (model/cache_rollback.h) on every golden model: a sequence fed
// in verify steps - each its true next tokens, then wrong ones, rolled back to the true ones -
// gives the logits of the same sequence fed in one call, at every position, across the window's
// wrap-around and every compressor's pooling (random splits, so rejected tokens fall before, on
// and after block ends), the copies back from the journals made at once or deferred (a batch's
// BlockCopies); and a step kept whole needs no rollback.
#include "model/cache_rollback.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "checkpoint/loader.h"
#include "model/golden.h"
#include "testing/compare.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4::model {
namespace {

using testing::max_row_rel_error;

class CacheRollbackTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto loaded = checkpoint::load_model(testing::golden_path(GetParam() + "/model"));
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    loaded_ = std::move(loaded).value();
    model_ = std::make_unique<Model>(loaded_.weights, ModelOptions{});
  }
  int64_t random_token() { return rng_.uniform_int(0, model_->config().vocab_size - 1); }

  testing::SeededRng rng_;
  checkpoint::LoadedModel loaded_;
  std::unique_ptr<Model> model_;
};

TEST_P(CacheRollbackTest, RejectedTokensLeaveNoTrace) {
  const checkpoint::ModelConfig& c = model_->config();
  int64_t longest_block = 1;
  for (const checkpoint::LayerSchedule& s : c.layers)
    longest_block = std::max(longest_block, s.compress_ratio);
  const int64_t n = 2 * std::max(c.sliding_window, longest_block) + 7, v = c.vocab_size;
  std::vector<int64_t> truth(static_cast<size_t>(n));
  for (int64_t& t : truth) t = random_token();

  auto whole_cache = model_->new_cache(n);
  ASSERT_TRUE(whole_cache.ok());
  Tensor want = Tensor::host(DType::kF32, {n, v});
  ASSERT_TRUE(model_->forward(truth, 0, *whole_cache, want.view()).ok());

  // Verify steps of up to 5 tokens (k = 4 drafts), the first a of them true.
  auto cache = model_->new_cache(n + 4, 8);
  ASSERT_TRUE(cache.ok());
  int64_t pos = 0, n_rolled_back = 0;
  while (pos < n) {
    const int64_t n_step = rng_.uniform_int(1, 5);
    const int64_t n_true = std::min(rng_.uniform_int(1, n_step), n - pos);
    std::vector<int64_t> step(truth.begin() + pos, truth.begin() + pos + n_true);
    while (static_cast<int64_t>(step.size()) < n_step) step.push_back(random_token());
    Tensor logits = Tensor::host(DType::kF32, {n_step, v});
    ASSERT_TRUE(arm_rollback(*cache).ok());
    ASSERT_TRUE(model_->forward(step, pos, *cache, logits.view()).ok());
    // Every other step defers its copies and runs them after, as the batch does.
    BlockCopies copies;
    const bool deferred = rng_.uniform_int(0, 1) == 1;
    const Status rolled = roll_back(*cache, pos + n_true, deferred ? &copies : nullptr);
    ASSERT_TRUE(rolled.ok()) << rolled.to_string();
    ASSERT_TRUE(copies.run().ok());
    n_rolled_back += n_step - n_true;
    SCOPED_TRACE("positions " + std::to_string(pos) + " + " + std::to_string(n_true) + " of " +
                 std::to_string(n_step));
    ASSERT_LT(max_row_rel_error(logits.data_as<float>(), want.data_as<float>() + pos * v, n_true,
                                v),
              testing::kStepwiseRelTol);
    pos += n_true;
    ASSERT_EQ(cache->n_tokens(), pos);
  }
  EXPECT_GT(n_rolled_back, 0);
}

INSTANTIATE_TEST_SUITE_P(Golden, CacheRollbackTest,
                         ::testing::Values("tiny_a_state_dict", "tiny_b_state_dict",
                                           "tiny_c_pretrained", "tiny_d_state_dict",
                                           "tiny_e_pretrained"));

}  // namespace
}  // namespace dsv4::model

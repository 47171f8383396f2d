// Speculative decoding on the GPU (label cuda) on every golden model with a random MTP block
// (speculative_batch_fixture.h), its weights on the device: greedy generations that cross every
// compressor's pool steps and the window's wrap-around, several sequences a batch with prompts
// in chunks beside the others' verify steps, are token for token the plain ones on the same
// device, at k = 1 and 4. The random block's drafts are mostly rejected, so the steps roll back
// and the drafting gathers each sequence's kept rows (kernels::gather_rows) on the device. The
// same with the speculative steps replayed from CUDA graphs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/speculative_batch_fixture.h"

namespace dsv4::runtime {
namespace {

class SpeculativeCudaTest : public SpeculativeBatchFixture {
 protected:
  void SetUp() override { load(Device::kCuda); }
};

TEST_P(SpeculativeCudaTest, GreedyTokensAreThoseWithoutSpeculation) {
  expect_plain_tokens(long_greedy_requests());
}

INSTANTIATE_TEST_SUITE_P(Golden, SpeculativeCudaTest,
                         ::testing::Values("tiny_a_state_dict", "tiny_b_state_dict",
                                           "tiny_c_pretrained", "tiny_d_state_dict",
                                           "tiny_e_pretrained"));

// With CUDA graphs (ModelOptions::cuda_graph) the verify steps and the MTP block's draft calls
// replay graphs (model/decode_graph.h): each request alone (every verify and draft step of the
// sequence replays once its rows were met twice), then all three in one batch. The greedy
// tokens must be those of plain decoding op by op, and both kinds of step must have replayed.
class SpeculativeGraphCudaTest : public SpeculativeBatchFixture {
 protected:
  void SetUp() override { load(Device::kCuda, model::ModelOptions{.cuda_graph = true}); }
};

TEST_P(SpeculativeGraphCudaTest, GreedyTokensAreThoseOfEagerPlainDecoding) {
  const std::vector<GenerateRequest> requests = long_greedy_requests();
  const model::Model eager(device_weights_, model::ModelOptions{});
  RunningBatch plain_batch(eager, c().eos_token_id, 16, kPrefixCacheBytes, 0);
  const BatchRun plain = run(requests, 0, &plain_batch);
  for (const int64_t k : {int64_t{1}, kMaxSpeculativeTokens}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    for (size_t i = 0; i < requests.size(); ++i) {
      const BatchRun alone = run({requests[i]}, k);
      ASSERT_TRUE(plain.results[i].ok() && alone.results[0].ok()) << i;
      EXPECT_EQ(alone.results[0]->tokens, plain.results[i]->tokens) << "sequence " << i << " alone";
    }
    const BatchRun together = run(requests, k);
    for (size_t i = 0; i < requests.size(); ++i) {
      ASSERT_TRUE(together.results[i].ok()) << i;
      EXPECT_EQ(together.results[i]->tokens, plain.results[i]->tokens) << "sequence " << i;
    }
    EXPECT_GT(together.totals.drafted_tokens, 0);
  }
  const model::DecodeGraphStats stats = model_->decode_graph_stats();
  EXPECT_GT(stats.verify_replays, 0);
  EXPECT_GT(stats.draft_replays, 0);
}

INSTANTIATE_TEST_SUITE_P(Golden, SpeculativeGraphCudaTest,
                         ::testing::Values("tiny_a_state_dict", "tiny_c_pretrained",
                                           "tiny_e_pretrained"));

}  // namespace
}  // namespace dsv4::runtime

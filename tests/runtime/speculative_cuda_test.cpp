// Speculative decoding on the GPU (label cuda) on every golden model with a random MTP block
// (speculative_batch_fixture.h), its weights on the device: greedy generations that cross every
// compressor's pool steps and the window's wrap-around, several sequences a batch with prompts
// in chunks beside the others' verify steps, are token for token the plain ones on the same
// device, at k = 1 and 4. The random block's drafts are mostly rejected, so the steps roll back
// and the drafting gathers each sequence's kept rows (kernels::gather_rows) on the device.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace dsv4::runtime

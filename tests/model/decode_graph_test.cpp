// DecodeGraphs' host side (model/decode_graph.h; its replays are checked on the GPU in
// decode_graph_cuda_test.cpp): which bucket a batch runs as, and that a CPU model never hands a
// step to a graph.
#include "model/decode_graph.h"

#include <gtest/gtest.h>

#include <vector>

#include "checkpoint/loader.h"
#include "model/golden.h"

namespace dsv4::model {
namespace {

TEST(DecodeGraphsTest, BatchesRunAsTheNextPowerOfTwoUpToTheMaxBatch) {
  // {batch, max batch, rows}
  const std::vector<std::vector<int64_t>> cases = {
      {1, 8, 1}, {2, 8, 2}, {3, 8, 4},  {4, 8, 4},   {5, 8, 8},   {7, 8, 8},  {8, 8, 8},
      {9, 8, 9}, {9, 12, 12}, {12, 12, 12}, {13, 12, 13}, {33, 64, 64}, {3, 3, 3}, {3, 0, 3},
      {5, 0, 5}};
  for (const std::vector<int64_t>& c : cases) {
    EXPECT_EQ(DecodeGraphs::bucket_size(c[0], c[1]), c[2])
        << "batch " << c[0] << ", max batch " << c[1];
  }
}

TEST(DecodeGraphsTest, ACpuModelRunsEveryStepOpByOp) {
  auto loaded = checkpoint::load_model(testing::golden_path("tiny_a_pretrained/model"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  const Model model(loaded->weights, ModelOptions{.cuda_graph = true, .cuda_graph_max_batch = 4});
  auto cache = model.new_cache(8);
  ASSERT_TRUE(cache.ok()) << cache.status().to_string();
  Tensor logits = Tensor::host(DType::kF32, {1, model.config().vocab_size});
  const std::vector<int64_t> token = {1};
  const SequenceChunk chunk{token, 0, &*cache, logits.view()};
  EXPECT_FALSE(DecodeGraphs::serves(model, std::span(&chunk, 1)));
  ASSERT_TRUE(model.forward(std::span(&chunk, 1)).ok());
  EXPECT_EQ(model.decode_graph_stats().graphs, 0);
  EXPECT_EQ(model.decode_graph_stats().device_bytes, 0);
}

}  // namespace
}  // namespace dsv4::model

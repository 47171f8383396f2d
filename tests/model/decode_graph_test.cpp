// DecodeGraphs' host side (model/decode_graph.h; its replays are checked on the GPU in
// decode_graph_cuda_test.cpp): which bucket a batch runs as, when padding rows are allowed, and
// that a CPU model never hands a step to a graph.
#include "model/decode_graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "checkpoint/loader.h"
#include "model/golden.h"
#include "model/nvfp4_golden.h"
#include "testing/temp_dir.h"

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

TEST(DecodeGraphsTest, W4A4ExpertsWithDynamicScalesRunEveryBatchUnpadded) {
  testing::TempDir dir;
  const std::string model_dir = testing::quantized_tiny_b(dir);
  ASSERT_FALSE(HasFailure());
  auto loaded = checkpoint::load_model(model_dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  checkpoint::ModelWeights& weights = loaded->weights;
  const ModelOptions w4a4{
      .expert_mode = ExpertMode::kW4A4, .cuda_graph = true, .cuda_graph_max_batch = 8};
  ModelOptions w4a16 = w4a4;
  w4a16.expert_mode = ExpertMode::kW4A16;
  // Calibrated input scales: static staging, each row its own.
  EXPECT_EQ(padding_max_batch(weights, w4a4), 8);
  EXPECT_EQ(padding_max_batch(weights, w4a16), 8);
  // One layer's down projection staged dynamically: the amax of all rows sets its scale.
  auto nvfp4 =
      std::find_if(weights.layers.begin(), weights.layers.end(),
                   [](const checkpoint::LayerWeights& l) { return l.ffn.experts.is_nvfp4(); });
  ASSERT_NE(nvfp4, weights.layers.end());
  nvfp4->ffn.experts.w2_input_scale = Tensor{};
  EXPECT_EQ(padding_max_batch(weights, w4a4), 0);
  EXPECT_EQ(padding_max_batch(weights, w4a16), 8);
  // Dense routed experts stage nothing.
  auto dense = checkpoint::load_model(testing::golden_path("tiny_a_pretrained/model"));
  ASSERT_TRUE(dense.ok()) << dense.status().to_string();
  EXPECT_EQ(padding_max_batch(dense->weights, w4a4), 8);
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

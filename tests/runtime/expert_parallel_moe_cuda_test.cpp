// Expert parallelism on one GPU (runtime/expert_parallel.h, label cuda), one MoE call at a time,
// against cuda::moe_ffn in place, bit for bit: random layers of kernels/moe_test_layer.h with 16
// experts (3 ranks split them 6/5/5), with and without a shared expert inside the call (rank 0
// runs it), calibrated and dynamic W4A4 scales, score, skewed and hash routing; T = 1 and 8
// (the small router), 9 and 128 (the fused expert kernels' range), 129 and 300 (the grouped
// path, which rank 0 runs whole), on 1 to 4 ranks whose buffers grow with T. The outputs are
// poisoned (NaN) before each call.
//
// Dimension letters: T tokens, D model width.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/moe_test_layer.h"
#include "kernels/moe_test_layer_device.h"
#include "runtime/expert_parallel.h"
#include "testing/device.h"
#include "testing/random.h"

namespace dsv4::runtime {
namespace {

using kernels::moe_test::MoeTestLayer;
using kernels::moe_test::Routing;

constexpr int64_t kDim = 256, kFfn = 128, kExperts = 16, kTopK = 4;

// A layer's calibrated W4A4 input scales (below the data's range, so some values saturate).
void set_static_scales(MoeTestLayer& layer) {
  layer.w13_input_scale = Tensor::host(DType::kF32, {1});
  layer.w13_input_scale.data_as<float>()[0] = 0.8f / 2688.0f;
  layer.w2_input_scale = Tensor::host(DType::kF32, {1});
  layer.w2_input_scale.data_as<float>()[0] = 1.0f / 2688.0f;
}

// y of one call of `layer` on T random tokens: moe_ffn in place, then each rank count.
void expect_ranks_give_moe_ffn_bits(testing::SeededRng& rng, const MoeTestLayer& layer, bool hash,
                                    int64_t n_tokens,
                                    std::vector<std::unique_ptr<ExpertParallel>>& rank_groups) {
  SCOPED_TRACE("T = " + std::to_string(n_tokens));
  const std::vector<float> x = kernels::moe_test::random_moe_input(rng, n_tokens, kDim);
  const std::vector<int64_t> ids = kernels::moe_test::random_token_ids(rng, n_tokens, layer.vocab);
  const Shape shape{n_tokens, kDim};
  const Tensor x_dev = testing::to_device(
      TensorView::contiguous(const_cast<float*>(x.data()), DType::kF32, Device::kCpu, shape));
  const Tensor ids_dev = testing::to_device(TensorView::contiguous(
      const_cast<int64_t*>(ids.data()), DType::kI64, Device::kCpu, {n_tokens}));
  const kernels::MoeWeightsView weights = layer.view(hash);
  const int64_t bytes = kernels::moe_ffn_workspace_bytes(n_tokens, weights, layer.config);
  Result<Tensor> workspace = Tensor::empty(DType::kU8, {bytes}, Device::kCuda);
  ASSERT_TRUE(workspace.ok()) << workspace.status().to_string();
  const Tensor expected = testing::poisoned_device(DType::kF32, shape);
  ASSERT_TRUE(kernels::moe_ffn(x_dev.view(), ids_dev.view(), weights, layer.config,
                               workspace->view(), expected.view())
                  .ok());
  const Tensor want = testing::to_host(expected.view());
  for (size_t r = 0; r < rank_groups.size(); ++r) {
    SCOPED_TRACE(std::to_string(r + 1) + " ranks");
    const Tensor y = testing::poisoned_device(DType::kF32, shape);
    const model::RoutedExpertsCall call{
        0, nullptr, weights, layer.config, x_dev.view(), ids_dev.view(), y.view()};
    const Status status = rank_groups[r]->run(call);
    ASSERT_TRUE(status.ok()) << status.to_string();
    EXPECT_TRUE(testing::same_bytes(testing::to_host(y.view()).view(), want.view()));
  }
}

TEST(ExpertParallelMoeCuda, OneToFourRanksGiveMoeFfnBits) {
  testing::SeededRng rng;
  checkpoint::ModelConfig config;
  config.hidden_size = kDim;
  config.n_routed_experts = kExperts;
  config.n_expert_used = kTopK;
  for (const Routing routing : {Routing::kScore, Routing::kSkewed, Routing::kHash}) {
    for (const bool shared : {false, true}) {
      for (const bool calibrated : {false, true}) {
        SCOPED_TRACE("routing " + std::to_string(static_cast<int>(routing)) +
                     (shared ? ", shared expert" : "") + (calibrated ? ", calibrated" : ""));
        MoeTestLayer layer = kernels::moe_test::make_moe_layer(rng, kDim, kFfn, kExperts, kTopK,
                                                               routing, kernels::MoeMode::kW4A4);
        layer.with_shared = shared;
        if (calibrated) set_static_scales(layer);
        const MoeTestLayer device = kernels::moe_test::on_device(layer, false);
        std::vector<std::unique_ptr<ExpertParallel>> rank_groups;
        for (int n = 1; n <= 4; ++n) {
          auto made = ExpertParallel::create(
              config, {.n_ranks = n, .device = Device::kCuda, .max_tokens = 8});
          ASSERT_TRUE(made.ok()) << made.status().to_string();
          rank_groups.push_back(std::move(made).value());
        }
        for (const int64_t n_tokens : {1, 8, 9, 128, 129, 300}) {
          expect_ranks_give_moe_ffn_bits(rng, device, routing == Routing::kHash, n_tokens,
                                         rank_groups);
        }
      }
    }
  }
}

}  // namespace
}  // namespace dsv4::runtime

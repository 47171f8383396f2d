// The model's MoE (model/moe.h) on CUDA against the same call on the CPU: NVFP4 routed experts
// through the fused moe_ffn op with the dense shared expert added beside it, at widths the CUDA
// pipeline runs (D and F multiples of 128, as in every DeepSeek-V4 checkpoint), both expert
// modes, score and hash routing, with and without calibrated input scales, with the routed
// experts on the device and in host memory (expert offload through the runtime's placement,
// runtime/offloaded_experts.h: at T = 1 and 37 the op copies the experts it touches to the
// device, at T = 130 both stacks are copied whole first). The output is poisoned first. And the
// call captured into a CUDA graph (the shared expert on its second stream) against the eager
// one, bit for bit.
//
// Dimension letters: T tokens, D model width, E routed experts, K experts per token, F expert
// width.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <tuple>
#include <vector>

#include "base/device_graph.h"
#include "kernels/moe_test_layer.h"
#include "model/moe.h"
#include "runtime/offloaded_experts.h"
#include "testing/compare.h"
#include "testing/device.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4::model {
namespace {

using checkpoint::ModelConfig;
using checkpoint::MoeWeights;
using checkpoint::RoutingType;
using kernels::moe_test::Routing;
using testing::to_device;
using testing::to_host;

// With `in_host_memory` the routed stacks' codes and block scales in mapped host memory, as
// expert offload places them.
MoeWeights on_device(const MoeWeights& w, bool in_host_memory) {
  MoeWeights d;
  d.experts.w13_input_scale = testing::to_device_or_empty(w.experts.w13_input_scale);
  d.experts.w2_input_scale = testing::to_device_or_empty(w.experts.w2_input_scale);
  d.gate = to_device(w.gate.view());
  d.bias = testing::to_device_or_empty(w.bias);
  d.tid2eid = testing::to_device_or_empty(w.tid2eid);
  const auto place = [&](const format::Nvfp4Tensor& stack) {
    return in_host_memory ? testing::to_mapped_host(stack) : to_device(stack);
  };
  d.experts.w13_nvfp4 = place(*w.experts.w13_nvfp4);
  d.experts.w2_nvfp4 = place(*w.experts.w2_nvfp4);
  d.experts.in_host_memory = in_host_memory;
  d.shared_expert.w1 = to_device(w.shared_expert.w1.view());
  d.shared_expert.w3 = to_device(w.shared_expert.w3.view());
  d.shared_expert.w2 = to_device(w.shared_expert.w2.view());
  return d;
}

// Rows [begin, end) of matrix 0 of a dequantized NVFP4 stack, as a dense f32 [rows, K].
Tensor dense_rows(const format::Nvfp4Tensor& q, int64_t begin, int64_t end) {
  Result<Tensor> all = format::dequantize_ref(q.view());
  DSV4_CHECK(all.ok(), "dequantize_ref failed");
  const int64_t k = q.n_cols();
  Tensor out = Tensor::host(DType::kF32, {end - begin, k});
  std::copy_n(all->data_as<float>() + begin * k, (end - begin) * k, out.data_as<float>());
  return out;
}

// A calibrated static input scale f32 [1] of `amax` / 2688 (what the loader keeps: the largest
// per-expert input_scale).
Tensor input_scale(double amax) {
  Tensor t = Tensor::host(DType::kF32, {1});
  t.data_as<float>()[0] = static_cast<float>(amax / 2688.0);
  return t;
}

// One layer's MoE at the test's widths (its routed stacks from moe_test_layer.h, the shared
// expert a dense copy of that layer's), with the config to run it.
struct MoeCase {
  ModelConfig config;
  MoeWeights w;
  int64_t vocab = 0;
};

MoeCase make_case(testing::SeededRng& rng, RoutingType routing, ExpertMode mode, bool calibrated) {
  const int64_t d = 256, f = 128, e = 16, k = 4;
  kernels::moe_test::MoeTestLayer layer = kernels::moe_test::make_moe_layer(
      rng, d, f, e, k, routing == RoutingType::kHash ? Routing::kHash : Routing::kScore, mode);
  MoeCase c;
  c.config.hidden_size = d;
  c.config.n_routed_experts = e;
  c.config.n_expert_used = k;
  c.config.moe_intermediate_size = f;
  c.config.routed_scaling_factor = layer.config.routed_scaling_factor;
  c.config.swiglu_limit = layer.config.swiglu_limit;
  c.config.layers.push_back({checkpoint::AttentionType::kSliding, 0, routing});

  c.w.gate = std::move(layer.gate);
  c.w.bias = std::move(layer.bias);
  c.w.tid2eid = std::move(layer.tid2eid);
  c.w.shared_expert.w1 = dense_rows(layer.shared_w13, 0, f);
  c.w.shared_expert.w3 = dense_rows(layer.shared_w13, f, 2 * f);
  c.w.shared_expert.w2 = dense_rows(layer.shared_w2, 0, d);
  if (calibrated) {  // below the data's range in places, so some elements saturate
    c.w.experts.w13_input_scale = input_scale(0.8);
    c.w.experts.w2_input_scale = input_scale(1.0);
  }
  c.w.experts.w13_nvfp4 = std::move(layer.w13);
  c.w.experts.w2_nvfp4 = std::move(layer.w2);
  c.vocab = layer.vocab;
  return c;
}

// A step's fresh inputs on the host: x f32 [T, D] and token ids i64 [T].
struct MoeInputs {
  Tensor x, tokens;
};

MoeInputs random_inputs(testing::SeededRng& rng, const MoeCase& c, int64_t n_tokens) {
  const int64_t d = c.config.hidden_size;
  const std::vector<float> x_values = kernels::moe_test::random_moe_input(rng, n_tokens, d);
  const std::vector<int64_t> ids = kernels::moe_test::random_token_ids(rng, n_tokens, c.vocab);
  MoeInputs in{Tensor::host(DType::kF32, {n_tokens, d}), Tensor::host(DType::kI64, {n_tokens})};
  std::copy(x_values.begin(), x_values.end(), in.x.data_as<float>());
  std::copy(ids.begin(), ids.end(), in.tokens.data_as<int64_t>());
  return in;
}

class MoeForwardCudaTest
    : public ::testing::TestWithParam<std::tuple<RoutingType, ExpertMode, bool, int, bool>> {};

TEST_P(MoeForwardCudaTest, MatchesTheCpu) {
  const auto [routing, mode, calibrated, n_tokens, in_host_memory] = GetParam();
  testing::SeededRng rng;
  const MoeCase c = make_case(rng, routing, mode, calibrated);
  const int64_t d = c.config.hidden_size;
  const MoeInputs in = random_inputs(rng, c, n_tokens);

  Tensor want = testing::poisoned_host(DType::kF32, {n_tokens, d});
  ASSERT_TRUE(moe_forward(c.config, 0, c.w, mode, in.x.view(), in.tokens.view(), want.view()).ok());
  const MoeWeights device_weights = on_device(c.w, in_host_memory);
  const Tensor x_dev = to_device(in.x.view()), tokens_dev = to_device(in.tokens.view());
  const Tensor out = testing::poisoned_device(DType::kF32, {n_tokens, d});
  runtime::OffloadedExperts placement;
  const Status status = moe_forward(c.config, 0, device_weights, mode, x_dev.view(),
                                    tokens_dev.view(), out.view(), nullptr, &placement);
  ASSERT_TRUE(status.ok()) << status.to_string();
  const Tensor got = to_host(out.view());
  if (mode == ExpertMode::kW4A16) {
    EXPECT_LT(testing::max_row_rel_error(got.data_as<float>(), want.data_as<float>(), n_tokens, d),
              testing::kMoeW4A16RelTol);
  } else {
    EXPECT_LT(
        testing::max_row_rel_error(got.data_as<float>(), want.data_as<float>(), 1, n_tokens * d),
        testing::kMoeW4A4RelTol);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Modes, MoeForwardCudaTest,
    ::testing::Combine(::testing::Values(RoutingType::kScore, RoutingType::kHash),
                       ::testing::Values(ExpertMode::kW4A16, ExpertMode::kW4A4),
                       ::testing::Values(false, true), ::testing::Values(1, 37, 130),
                       ::testing::Values(false, true)));

// The shared expert runs beside the router and the routed experts on a second stream
// (kernels::run_beside): a decode step's MoE captured into a CUDA graph, with both chains as
// its parallel branches, gives the eager call's bits on each of several fresh inputs copied
// into the captured buffers, as a replayed decode step does.
class MoeForwardGraphCudaTest
    : public ::testing::TestWithParam<std::tuple<RoutingType, ExpertMode, int>> {};

TEST_P(MoeForwardGraphCudaTest, ReplayGivesTheEagerBits) {
  const auto [routing, mode, n_tokens] = GetParam();
  testing::SeededRng rng;
  const MoeCase c = make_case(rng, routing, mode, /*calibrated=*/false);
  const int64_t d = c.config.hidden_size;
  const MoeWeights w = on_device(c.w, /*in_host_memory=*/false);
  const Tensor x = testing::poisoned_device(DType::kF32, {n_tokens, d});
  const Tensor tokens = testing::poisoned_device(DType::kI64, {n_tokens});
  const Tensor eager = testing::poisoned_device(DType::kF32, {n_tokens, d});
  const Tensor replayed = testing::poisoned_device(DType::kF32, {n_tokens, d});
  // Fresh inputs into the captured buffers, and the eager call on them.
  const auto eager_step = [&] {
    const MoeInputs in = random_inputs(rng, c, n_tokens);
    DSV4_RETURN_IF_ERROR(copy_tensor(x.view(), in.x.view()));
    DSV4_RETURN_IF_ERROR(copy_tensor(tokens.view(), in.tokens.view()));
    return moe_forward(c.config, 0, w, mode, x.view(), tokens.view(), eager.view());
  };
  // As the engine does: an eager step first (the kernels' one-time setup, the side stream),
  // then the capture.
  ASSERT_TRUE(eager_step().ok());
  Result<DeviceGraph> graph = DeviceGraph::capture(
      [&] { return moe_forward(c.config, 0, w, mode, x.view(), tokens.view(), replayed.view()); });
  ASSERT_TRUE(graph.ok()) << graph.status().to_string();
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    const Status status = eager_step();
    ASSERT_TRUE(status.ok()) << status.to_string();
    ASSERT_TRUE(graph->launch().ok());
    EXPECT_TRUE(testing::same_bytes(to_host(replayed.view()).view(), to_host(eager.view()).view()));
    const Tensor poison = testing::poisoned_host(DType::kF32, {n_tokens, d});
    ASSERT_TRUE(copy_tensor(replayed.view(), poison.view()).ok());
  }
}

INSTANTIATE_TEST_SUITE_P(
    DecodeSizes, MoeForwardGraphCudaTest,
    ::testing::Combine(::testing::Values(RoutingType::kScore, RoutingType::kHash),
                       ::testing::Values(ExpertMode::kW4A16, ExpertMode::kW4A4),
                       ::testing::Values(1, 2, 8)));

}  // namespace
}  // namespace dsv4::model

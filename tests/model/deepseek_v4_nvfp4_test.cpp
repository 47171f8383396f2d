// The forward with NVFP4 routed experts: tiny_b quantized by `dsv4 quantize`'s library (ModelOpt
// layout). W4A16 through the fused MoE op must compute the dense forward of the dequantized
// weights (the loader's keep_nvfp4 = false) up to the bf16 rounding of the experts' activations;
// W4A4 adds the activations' 4-bit rounding, so it differs by much more (random tiny models
// amplify any perturbation; the tight bounds of both modes are per layer, in moe_test.cpp).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "checkpoint/loader.h"
#include "checkpoint/quantize.h"
#include "model/deepseek_v4.h"
#include "model/golden.h"
#include "testing/compare.h"
#include "testing/temp_dir.h"
#include "testing/tolerance.h"

namespace dsv4::model {
namespace {

Tensor prompt_logits(const checkpoint::ModelWeights& weights, ExpertMode mode,
                     const std::vector<int64_t>& ids) {
  const Model model(weights, ModelOptions{mode});
  auto cache = model.new_cache(static_cast<int64_t>(ids.size()));
  EXPECT_TRUE(cache.ok());
  Tensor logits =
      Tensor::host(DType::kF32, {static_cast<int64_t>(ids.size()), model.config().vocab_size});
  const Status status = model.forward(ids, 0, *cache, logits.view());
  EXPECT_TRUE(status.ok()) << status.to_string();
  return logits;
}

TEST(ModelNvfp4Test, W4A16IsNearTheDenseForwardOfTheDequantizedExperts) {
  testing::TempDir dir;
  checkpoint::QuantizeOptions options;
  // One static activation scale for every expert input: the SwiGLU outputs reach ~10 · silu(10)
  // under the clamp, so the range covers |x| ≈ 128 (block scales keep small rows precise).
  options.input_scale = 128.0f / 2688.0f;
  auto summary = checkpoint::quantize_checkpoint(testing::golden_path("tiny_b_state_dict/model"),
                                                 dir.path() + "/model", options);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  auto packed = checkpoint::load_model(dir.path() + "/model");
  checkpoint::LoadOptions dequantize;
  dequantize.keep_nvfp4 = false;
  auto dense = checkpoint::load_model(dir.path() + "/model", dequantize);
  ASSERT_TRUE(packed.ok() && dense.ok());
  ASSERT_TRUE(packed->report.clean() && dense->report.clean());
  ASSERT_TRUE(packed->weights.layers[0].ffn.experts.is_nvfp4());
  ASSERT_FALSE(dense->weights.layers[0].ffn.experts.is_nvfp4());

  const auto ref = testing::open_golden("tiny_b_state_dict/reference.safetensors");
  const Tensor prompt = testing::golden_tensor(ref, "prompt_2");
  const std::vector<int64_t> ids(prompt.data_as<int64_t>(),
                                 prompt.data_as<int64_t>() + prompt.numel());
  const int64_t t = prompt.numel(), v = packed->weights.config.vocab_size;
  const Tensor want = prompt_logits(dense->weights, ExpertMode::kW4A16, ids);
  const Tensor w4a16 = prompt_logits(packed->weights, ExpertMode::kW4A16, ids);
  const Tensor w4a4 = prompt_logits(packed->weights, ExpertMode::kW4A4, ids);
  const double a16 =
      testing::max_row_rel_error(w4a16.data_as<float>(), want.data_as<float>(), t, v);
  const double a4 = testing::max_row_rel_error(w4a4.data_as<float>(), want.data_as<float>(), t, v);
  std::printf("max row rel error vs dequantized dense: W4A16 %.3e, W4A4 %.3e\n", a16, a4);
  EXPECT_LT(a16, testing::kBf16ExpertInputsModelRelTol);
  EXPECT_GT(a4, testing::kBf16ExpertInputsModelRelTol) << "W4A4 did not stage the activations";
  EXPECT_LT(a4, testing::kNvfp4ActivationModelRelTol);
}

}  // namespace
}  // namespace dsv4::model

// The forward with NVFP4 routed experts: tiny_b quantized by `dsv4 quantize`'s library (ModelOpt
// layout). W4A16 through the fused MoE op must compute the dense forward of the dequantized
// weights (the loader's keep_fp4_packed = false) up to the bf16 rounding of the experts' activations;
// W4A4 adds the activations' 4-bit rounding, so it differs by much more (random tiny models
// amplify any perturbation; the tight bounds of both modes are per layer, in moe_test.cpp).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "checkpoint/loader.h"
#include "model/deepseek_v4.h"
#include "model/golden.h"
#include "model/nvfp4_golden.h"
#include "testing/compare.h"
#include "testing/temp_dir.h"
#include "testing/tolerance.h"

namespace dsv4::model {
namespace {

TEST(ModelNvfp4Test, W4A16IsNearTheDenseForwardOfTheDequantizedExperts) {
  testing::TempDir dir;
  const std::string model_dir = testing::quantized_tiny_b(dir);
  ASSERT_FALSE(HasFailure());
  auto packed = checkpoint::load_model(model_dir);
  checkpoint::LoadOptions dequantize;
  dequantize.keep_fp4_packed = false;
  auto dense = checkpoint::load_model(model_dir, dequantize);
  ASSERT_TRUE(packed.ok() && dense.ok());
  ASSERT_TRUE(packed->report.clean() && dense->report.clean());
  ASSERT_TRUE(packed->weights.layers[0].ffn.experts.is_nvfp4());
  ASSERT_FALSE(dense->weights.layers[0].ffn.experts.is_nvfp4());

  const auto ref = testing::open_golden("tiny_b_state_dict/reference.safetensors");
  const Tensor prompt = testing::golden_tensor(ref, "prompt_2");
  const std::vector<int64_t> ids(prompt.data_as<int64_t>(),
                                 prompt.data_as<int64_t>() + prompt.numel());
  const int64_t t = prompt.numel(), v = packed->weights.config.vocab_size;
  const Tensor want = testing::host_prompt_logits(dense->weights, ExpertMode::kW4A16, ids);
  const Tensor w4a16 = testing::host_prompt_logits(packed->weights, ExpertMode::kW4A16, ids);
  const Tensor w4a4 = testing::host_prompt_logits(packed->weights, ExpertMode::kW4A4, ids);
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

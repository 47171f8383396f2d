// A model whose linears are FP8 (tests/model/fp8_golden.h) computes on the CPU with the bits of
// the same model on their decoded f32 values: the CPU reference of what a GPU's exact profile
// does with an FP8 checkpoint (kernels/ops.h, the FP8 linear). And the same weights in the fast
// profile (ModelOptions::numerics) run the CPU reference of DeepSeek's FP8 linear
// (kernels::linear_fp8: the GPU's quantizer bit for bit, f32 sums), whose distance from exact is
// recorded (docs/numerics.md) and bounded.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "model/deepseek_v4.h"
#include "model/fp8_golden.h"
#include "testing/compare.h"
#include "testing/tolerance.h"

namespace dsv4::model {
namespace {

// The prefill logits of prompt_0 of `reference` under `weights` (host) in profile `numerics`.
Tensor prefill_logits(const checkpoint::ModelWeights& weights,
                      const format::SafetensorsFile& reference, Numerics numerics) {
  const Tensor prompt = testing::golden_tensor(reference, "prompt_0");
  const std::vector<int64_t> ids(prompt.data_as<int64_t>(),
                                 prompt.data_as<int64_t>() + prompt.numel());
  const Model model(weights, ModelOptions{.numerics = numerics});
  const auto n = static_cast<int64_t>(ids.size());
  auto cache = model.new_cache(n);
  EXPECT_TRUE(cache.ok());
  Tensor logits = Tensor::host(DType::kF32, {n, model.config().vocab_size});
  const Status status = model.forward(ids, 0, *cache, logits.view());
  EXPECT_TRUE(status.ok()) << status.to_string();
  return logits;
}

class Fp8GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(Fp8GoldenTest, CpuForwardOnFp8LinearsHasTheBitsOfTheirDecoding) {
  const testing::Fp8Golden fp8 = testing::fp8_golden(GetParam());
  ASSERT_TRUE(fp8.kept.head.is_fp8() && fp8.kept.layers[0].attn.wo_a.is_fp8());
  const format::SafetensorsFile reference =
      testing::open_golden(GetParam() + "/reference.safetensors");
  const Tensor want = prefill_logits(fp8.decoded, reference, Numerics::kExact);
  const Tensor got = prefill_logits(fp8.kept, reference, Numerics::kExact);
  ASSERT_EQ(got.numel(), want.numel());
  EXPECT_EQ(std::memcmp(got.data_as<float>(), want.data_as<float>(), 4 * got.numel()), 0);
}

TEST_P(Fp8GoldenTest, FastLinearsOnTheCpuReferenceStayNearExact) {
  const testing::Fp8Golden fp8 = testing::fp8_golden(GetParam());
  const format::SafetensorsFile reference =
      testing::open_golden(GetParam() + "/reference.safetensors");
  const Tensor exact_logits = prefill_logits(fp8.kept, reference, Numerics::kExact);
  const Tensor fast_logits = prefill_logits(fp8.kept, reference, Numerics::kFast);
  const int64_t rows = exact_logits.shape()[0], v = exact_logits.shape()[1];
  const double error = testing::max_row_rel_error(fast_logits.data_as<float>(),
                                                  exact_logits.data_as<float>(), rows, v);
  int64_t same_top = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* e = exact_logits.data_as<float>() + r * v;
    const float* f = fast_logits.data_as<float>() + r * v;
    same_top += std::max_element(e, e + v) - e == std::max_element(f, f + v) - f;
  }
  RecordProperty("logits_max_row_rel_error", std::to_string(error));
  RecordProperty("top1_agreement", std::to_string(double(same_top) / double(rows)));
  EXPECT_GT(error, 0.0);  // the fast linears ran
  EXPECT_LT(error, testing::kFastModelLogitsRelTol);
}

INSTANTIATE_TEST_SUITE_P(Oracle, Fp8GoldenTest,
                         ::testing::Values("tiny_a_pretrained", "tiny_a_state_dict",
                                           "tiny_b_state_dict", "tiny_c_pretrained",
                                           "tiny_d_state_dict", "tiny_e_pretrained"));

}  // namespace
}  // namespace dsv4::model

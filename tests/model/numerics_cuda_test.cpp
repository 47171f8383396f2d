// The numerics profiles on the GPU over the golden models with their dense linears in FP8
// (fp8_golden.h, as an FP8 checkpoint of each would hold them):
// - exact on FP8 weights kept FP8 on the device (load_model_on's form) gives the logits of the
//   same model on their bf16 decoding (what the GPU held before, copy_weights of the host's
//   decode) bit for bit, a prefill and the decode steps after it;
// - fast against exact: one linear per row within kFastLinearRelTol, and the whole model's
//   logits, recorded (test properties) and bounded (docs/numerics.md has the measured values);
// - linear_pair against two linear() calls, bit for bit (linear_pair_case.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "model/deepseek_v4.h"
#include "model/fp8_golden.h"
#include "model/linear.h"
#include "model/linear_pair_case.h"
#include "testing/compare.h"
#include "testing/device.h"
#include "testing/tolerance.h"

namespace dsv4::model {
namespace {

std::vector<int64_t> ids_of(const Tensor& t) {
  return std::vector<int64_t>(t.data_as<int64_t>(), t.data_as<int64_t>() + t.numel());
}

// The logits of prompt_0 of `reference` then of its greedy continuation fed one token a step,
// [n + n_gen - 1, V] on the host, under `weights` (on the device) and `options`.
Tensor prefill_and_steps(const checkpoint::ModelWeights& weights, ModelOptions options,
                         const format::SafetensorsFile& reference) {
  const std::vector<int64_t> prompt = ids_of(testing::golden_tensor(reference, "prompt_0"));
  const std::vector<int64_t> greedy = ids_of(testing::golden_tensor(reference, "greedy_0"));
  const Model model(weights, options);
  const auto n = static_cast<int64_t>(prompt.size()), n_gen = static_cast<int64_t>(greedy.size());
  const int64_t v = model.config().vocab_size;
  auto cache = model.new_cache(n + n_gen);
  EXPECT_TRUE(cache.ok());
  const Tensor logits = testing::poisoned_device(DType::kF32, {n + n_gen - 1, v});
  Status status = model.forward(prompt, 0, *cache, logits.view().rows(0, n));
  EXPECT_TRUE(status.ok()) << status.to_string();
  for (int64_t s = 0; status.ok() && s + 1 < n_gen; ++s) {
    status = model.forward({&greedy[s], 1}, n + s, *cache, logits.view().rows(n + s, n + s + 1));
    EXPECT_TRUE(status.ok()) << status.to_string();
  }
  return testing::to_host(logits.view());
}

class NumericsCudaTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const testing::Fp8Golden fp8 = testing::fp8_golden(GetParam());
    auto decoded = checkpoint::copy_weights(fp8.decoded, Device::kCuda);
    auto kept = checkpoint::copy_weights(fp8.kept, Device::kCuda);
    ASSERT_TRUE(decoded.ok() && kept.ok());
    decoded_ = std::move(decoded).value();
    kept_ = std::move(kept).value();
    reference_.emplace(testing::open_golden(GetParam() + "/reference.safetensors"));
  }
  checkpoint::ModelWeights decoded_, kept_;
  std::optional<format::SafetensorsFile> reference_;
};

TEST_P(NumericsCudaTest, ExactOnFp8WeightsHasTheBitsOfTheirBf16Decoding) {
  ASSERT_EQ(kept_.layers[0].attn.wq_b.dtype(), DType::kF8E4M3);
  ASSERT_EQ(decoded_.layers[0].attn.wq_b.dtype(), DType::kBF16);
  const ModelOptions exact{.numerics = Numerics::kExact};
  const Tensor want = prefill_and_steps(decoded_, exact, *reference_);
  const Tensor got = prefill_and_steps(kept_, exact, *reference_);
  EXPECT_TRUE(testing::same_bytes(got.view(), want.view()));
}

// The whole model in the fast profile (ModelOptions::numerics: its FP8 linears, attention and
// indexer) against exact on the same FP8 weights: the worst logits row and the share of positions
// whose top token agrees, recorded for docs/numerics.md.
// These tiny random-weight models amplify any perturbation (tolerance.h,
// kNvfp4ActivationModelRelTol), so the bound is loose; kFastLinearRelTol is the tight one.
TEST_P(NumericsCudaTest, FastLogitsStayNearExact) {
  const Tensor exact = prefill_and_steps(kept_, {.numerics = Numerics::kExact}, *reference_);
  const Tensor fast = prefill_and_steps(kept_, {.numerics = Numerics::kFast}, *reference_);
  const int64_t rows = exact.shape()[0], v = exact.shape()[1];
  const double error =
      testing::max_row_rel_error(fast.data_as<float>(), exact.data_as<float>(), rows, v);
  int64_t same_top = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* e = exact.data_as<float>() + r * v;
    const float* f = fast.data_as<float>() + r * v;
    same_top += std::max_element(e, e + v) - e == std::max_element(f, f + v) - f;
  }
  RecordProperty("logits_max_row_rel_error", std::to_string(error));
  RecordProperty("top1_agreement", std::to_string(double(same_top) / double(rows)));
  EXPECT_GT(error, 0.0);  // the fast profile ran
  EXPECT_LT(error, testing::kFastModelLogitsRelTol);
}

// One linear: fast (activation in FP8) against exact on the same FP8 weight, at a decode step's
// and a prefill's rows, on V4 widths and on K off the 128-column groups.
TEST(FastLinearCudaTest, StaysWithinTheActivationRoundingOfExact) {
  testing::SeededRng rng;
  for (const auto& [t, n, k] :
       {std::tuple{1, 1024, 4096}, {8, 512, 4096}, {300, 2048, 1024}, {33, 200, 400}}) {
    SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(n) + "x" + std::to_string(k));
    const testing::Fp8Weight fp8 = testing::random_fp8_weight(rng, n, k);
    Tensor codes = Tensor::host(DType::kF8E4M3, {n, k});
    std::copy(fp8.codes.begin(), fp8.codes.end(), codes.data_as<uint8_t>());
    Tensor scales = Tensor::host(DType::kF32, {(n + 127) / 128, fp8.scale_cols()});
    std::copy(fp8.scales.begin(), fp8.scales.end(), scales.data_as<float>());
    checkpoint::LinearWeight w(testing::to_device(codes.view()));
    w.block_scales = testing::to_device(scales.view());
    Tensor x = Tensor::host(DType::kF32, {t, k});
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = normal(rng.engine());
    const Tensor x_d = testing::to_device(x.view());
    const Tensor y_exact = testing::poisoned_device(DType::kF32, {t, n});
    const Tensor y_fast = testing::poisoned_device(DType::kF32, {t, n});
    ASSERT_TRUE(linear(x_d.view(), w, y_exact.view(), Numerics::kExact).ok());
    ASSERT_TRUE(linear(x_d.view(), w, y_fast.view(), Numerics::kFast).ok());
    const Tensor e = testing::to_host(y_exact.view()), f = testing::to_host(y_fast.view());
    const double error = testing::max_row_rel_error(f.data_as<float>(), e.data_as<float>(), t, n);
    EXPECT_LT(error, testing::kFastLinearRelTol);
    EXPECT_GT(error, 1e-3);  // the activation was quantized
  }
}

// The shared expert's w1 and w3 through linear_pair (one quantized x in the fast profile) give
// the bits of two linear() calls.
TEST(LinearPairCudaTest, HasTheBitsOfTwoLinears) {
  testing_linear::expect_pair_has_the_bits_of_two_linears(Device::kCuda);
}

INSTANTIATE_TEST_SUITE_P(Oracle, NumericsCudaTest,
                         ::testing::Values("tiny_a_pretrained", "tiny_a_state_dict",
                                           "tiny_b_state_dict", "tiny_c_pretrained",
                                           "tiny_d_state_dict", "tiny_e_pretrained"));

}  // namespace
}  // namespace dsv4::model

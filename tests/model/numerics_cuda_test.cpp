// The numerics profiles on the GPU over the golden models with their dense linears in FP8
// (fp8_golden.h, as an FP8 checkpoint of each would hold them):
// - exact on FP8 weights kept FP8 on the device (load_model_on's form) gives the logits of the
//   same model on their bf16 decoding (what the GPU held before, copy_weights of the host's
//   decode) bit for bit, a prefill and the decode steps after it.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "model/deepseek_v4.h"
#include "model/fp8_golden.h"
#include "testing/compare.h"
#include "testing/device.h"

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

INSTANTIATE_TEST_SUITE_P(Oracle, NumericsCudaTest,
                         ::testing::Values("tiny_a_pretrained", "tiny_a_state_dict",
                                           "tiny_b_state_dict", "tiny_c_pretrained",
                                           "tiny_d_state_dict", "tiny_e_pretrained"));

}  // namespace
}  // namespace dsv4::model

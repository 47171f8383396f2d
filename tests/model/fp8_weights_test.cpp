// A model whose linears are FP8 (tests/model/fp8_golden.h) computes on the CPU with the bits of
// the same model on their decoded f32 values: the CPU reference of what a GPU's exact profile
// does with an FP8 checkpoint (kernels/ops.h, the FP8 linear).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "model/deepseek_v4.h"
#include "model/fp8_golden.h"

namespace dsv4::model {
namespace {

// The prefill logits of prompt_0 of `reference` under `weights` (host).
Tensor prefill_logits(const checkpoint::ModelWeights& weights,
                      const format::SafetensorsFile& reference) {
  const Tensor prompt = testing::golden_tensor(reference, "prompt_0");
  const std::vector<int64_t> ids(prompt.data_as<int64_t>(),
                                 prompt.data_as<int64_t>() + prompt.numel());
  const Model model(weights, ModelOptions{});
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
  const Tensor want = prefill_logits(fp8.decoded, reference);
  const Tensor got = prefill_logits(fp8.kept, reference);
  ASSERT_EQ(got.numel(), want.numel());
  EXPECT_EQ(std::memcmp(got.data_as<float>(), want.data_as<float>(), 4 * got.numel()), 0);
}

INSTANTIATE_TEST_SUITE_P(Oracle, Fp8GoldenTest,
                         ::testing::Values("tiny_a_pretrained", "tiny_d_state_dict",
                                           "tiny_e_pretrained"));

}  // namespace
}  // namespace dsv4::model

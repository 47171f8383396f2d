// RoPE frequencies (model/rope.h) against the cos/sin tables transformers'
// DeepseekV4RotaryEmbedding produced for prompt 0 of each golden config: the plain "main" table of
// sliding layers and the YaRN "compress" table (original_max_position_embeddings 256, so the ramp
// blends real pairs).
#include "model/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "checkpoint/config.h"
#include "model/golden.h"
#include "testing/compare.h"
#include "testing/tolerance.h"

namespace dsv4::model {
namespace {

using testing::golden_tensor;
using testing::kF32OpRelTol;
using testing::max_row_rel_error;

class RopeGoldenTest : public ::testing::TestWithParam<const char*> {};

TEST_P(RopeGoldenTest, CosSinMatchTransformers) {
  const std::string folder = GetParam();
  auto config = checkpoint::load_model_config(testing::golden_path(folder + "/model"));
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  const format::SafetensorsFile layers = testing::open_golden(folder + "/layers.safetensors");
  const int64_t n_tokens = std::stoll(layers.metadata().at("prompt_len"));
  // The model computes "main" first, then "compress" (its second call).
  const std::pair<std::string, checkpoint::RopeConfig> tables[] = {
      {"model.rotary_emb", config.value().rope_sliding},
      {"model.rotary_emb.call_1", config.value().rope_compressed}};
  for (const auto& [name, rope] : tables) {
    const std::vector<float> inv_freq = rope_inv_freq(rope, config.value().rope_head_dim);
    const int64_t n_pairs = static_cast<int64_t>(inv_freq.size());
    const Tensor cos_ref = golden_tensor(layers, name + ".out_0", {n_tokens, n_pairs});
    const Tensor sin_ref = golden_tensor(layers, name + ".out_1", {n_tokens, n_pairs});
    std::vector<float> cos_ours(n_tokens * n_pairs), sin_ours(n_tokens * n_pairs);
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t i = 0; i < n_pairs; ++i) {
        const float angle = static_cast<float>(t) * inv_freq[i];
        cos_ours[t * n_pairs + i] = std::cos(angle);
        sin_ours[t * n_pairs + i] = std::sin(angle);
      }
    }
    // Row 0 of sin is all zeros (position 0): compare the tables as a whole.
    EXPECT_LT(max_row_rel_error(cos_ours.data(), cos_ref.data_as<float>(), 1, n_tokens * n_pairs),
              kF32OpRelTol)
        << name << " cos";
    EXPECT_LT(max_row_rel_error(sin_ours.data(), sin_ref.data_as<float>(), 1, n_tokens * n_pairs),
              kF32OpRelTol)
        << name << " sin";
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, RopeGoldenTest,
                         ::testing::Values("tiny_a_pretrained", "tiny_b_state_dict",
                                           "tiny_d_state_dict", "tiny_e_pretrained"));

}  // namespace
}  // namespace dsv4::model

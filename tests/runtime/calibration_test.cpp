// dsv4 quantize's calibration pass (runtime/calibration.h): recorded amaxes become amax / 2688
// with unreached experts at their layer's largest; the pass over a golden checkpoint records
// every token's K routed experts in every layer; bad tokens, quantized experts and a record of
// another model's shape are refused.
#include "runtime/calibration.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "checkpoint/loader.h"
#include "checkpoint/quantize.h"
#include "format/nvfp4.h"
#include "model/golden.h"
#include "model/layerwise_forward.h"
#include "testing/temp_dir.h"

namespace dsv4::runtime {
namespace {

Tensor host_f32(Shape shape, std::vector<float> values) {
  Tensor t = Tensor::host(DType::kF32, shape);
  std::copy(values.begin(), values.end(), t.data_as<float>());
  return t;
}

Tensor host_offsets(std::vector<int32_t> values) {
  Tensor t = Tensor::host(DType::kI32, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.data_as<int32_t>());
  return t;
}

TEST(CalibrationTest, ScalesAreAmaxOver2688AndUnreachedExpertsTakeTheLayersLargest) {
  model::ExpertAmaxes amaxes(1, 3);
  // Expert 0 takes rows 0 and 1, expert 1 none, expert 2 row 2.
  const Tensor offsets = host_offsets({0, 2, 2, 3});
  const Tensor rows = host_f32({3, 2}, {1.0f, -5.0f, 2.0f, 0.5f, 0.25f, -7.0f});
  const Tensor hidden = host_f32({3, 2}, {0.1f, -0.2f, 0.3f, 0.0f, 4.0f, -1.0f});
  ASSERT_TRUE(amaxes.record(0, offsets.view(), rows.view(), hidden.view()).ok());
  Result<ExpertCalibration> c = input_scales_of(amaxes);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const float r = format::kNvfp4Range;
  EXPECT_EQ(c->scales.gate_up[0], (std::vector<float>{5.0f / r, 7.0f / r, 7.0f / r}));
  EXPECT_EQ(c->scales.down[0], (std::vector<float>{0.3f / r, 4.0f / r, 4.0f / r}));
  EXPECT_EQ(c->n_unreached, 1);
}

TEST(CalibrationTest, ALayerWhoseExpertsSawOnlyZerosIsRefused) {
  model::ExpertAmaxes amaxes(1, 2);
  const Tensor offsets = host_offsets({0, 1, 2});
  const Tensor zeros = host_f32({2, 2}, {0.0f, 0.0f, 0.0f, 0.0f});
  const Tensor hidden = host_f32({2, 2}, {1.0f, 0.0f, 0.0f, 1.0f});
  ASSERT_TRUE(amaxes.record(0, offsets.view(), zeros.view(), hidden.view()).ok());
  Result<ExpertCalibration> c = input_scales_of(amaxes);
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("layer 0"), std::string::npos);
}

std::vector<int64_t> some_ids(int64_t n, int64_t vocab) {
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = (i * 37 + 11) % vocab;
  return ids;
}

// Every token goes to K routed experts in every layer (score and hash layers alike), so a layer's
// rows add up to T·K; the streamed pass (each layer dropped once run) gives the scales of a
// layerwise forward over the whole model, one usable scale per layer and expert.
TEST(CalibrationTest, AStreamedPassRecordsEveryRouteAsTheWholeModelDoes) {
  const std::string dir = testing::golden_path("tiny_a_pretrained/model");
  auto loaded = checkpoint::load_model(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  const checkpoint::ModelWeights& w = loaded->weights;
  const checkpoint::ModelConfig& config = w.config;
  const std::vector<int64_t> ids = some_ids(24, config.vocab_size);
  model::ExpertAmaxes amaxes(config.n_layer, config.n_routed_experts);
  auto forward = model::LayerwiseForward::start(config, w.embed.view(), ids, &amaxes);
  ASSERT_TRUE(forward.ok()) << forward.status().to_string();
  for (int64_t layer = 0; layer < config.n_layer; ++layer) {
    ASSERT_TRUE(forward->run_layer(layer, w.layers[layer]).ok());
    int64_t rows = 0;
    for (int64_t e = 0; e < config.n_routed_experts; ++e) rows += amaxes.at(layer, e).rows;
    EXPECT_EQ(rows, 24 * config.n_expert_used) << "layer " << layer;
  }
  Result<ExpertCalibration> whole = input_scales_of(amaxes);
  ASSERT_TRUE(whole.ok()) << whole.status().to_string();

  Result<ExpertCalibration> streamed = calibrate_expert_inputs(dir, ids);
  ASSERT_TRUE(streamed.ok()) << streamed.status().to_string();
  EXPECT_EQ(streamed->n_tokens, 24);
  EXPECT_EQ(streamed->n_unreached, whole->n_unreached);
  EXPECT_EQ(streamed->scales.gate_up, whole->scales.gate_up);
  EXPECT_EQ(streamed->scales.down, whole->scales.down);
  for (const auto* by_layer : {&streamed->scales.gate_up, &streamed->scales.down}) {
    for (const std::vector<float>& layer : *by_layer) {
      for (float scale : layer) EXPECT_TRUE(scale > 0.0f && std::isfinite(scale));
    }
  }
}

TEST(CalibrationTest, RefusesNoTokensForeignIdsAndQuantizedExperts) {
  const std::string dir = testing::golden_path("tiny_a_pretrained/model");
  EXPECT_EQ(calibrate_expert_inputs(dir, {}).status().code(), StatusCode::kInvalidArgument);
  const std::vector<int64_t> foreign = {1, 2, 1 << 20};
  EXPECT_EQ(calibrate_expert_inputs(dir, foreign).status().code(), StatusCode::kInvalidArgument);

  testing::TempDir out;
  checkpoint::QuantizeOptions options;
  options.input_scale = 0.01f;
  ASSERT_TRUE(checkpoint::quantize_checkpoint(dir, out.file("q"), options).ok());
  const Result<ExpertCalibration> quantized = calibrate_expert_inputs(out.file("q"), {{1, 2, 3}});
  EXPECT_EQ(quantized.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(quantized.status().message().find("FP4"), std::string::npos);
}

}  // namespace
}  // namespace dsv4::runtime

// quantize_checkpoint on the transformers-written golden checkpoints (both layouts): the output
// binds with zero problems and keeps the experts packed; codes and scales equal the float64
// reference quantizer with w1/w3 sharing one global scale; everything else is byte-identical;
// the dequantized experts stay within NVFP4's error of the originals; the output directory and
// the input scale are guarded.
#include "checkpoint/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include "base/float_convert.h"
#include "checkpoint/loader.h"
#include "format/checkpoint_files.h"
#include "format/json.h"
#include "format/safetensors.h"
#include "testing/nvfp4_reference.h"
#include "testing/temp_dir.h"
#include "testing/tiny_checkpoint.h"
#include "testing/tolerance.h"

namespace dsv4::checkpoint {
namespace {

using dsv4::testing::TempDir;

std::string golden_model(const std::string& name) {
  const char* root = std::getenv("DSV4_SOURCE_DIR");
  return std::string(root ? root : ".") + "/tests/golden/" + name + "/model";
}

format::SafetensorsFile open_file(const std::string& path) {
  Result<format::SafetensorsFile> file = format::SafetensorsFile::open(path);
  DSV4_CHECK(file.ok(), "%s", file.status().to_string().c_str());
  return std::move(file).value();
}

float f32_at(const format::TensorInfo& t, int64_t i) {
  float v;
  std::memcpy(&v, t.data + i * 4, 4);
  return v;
}

float bf16_at(const format::TensorInfo& t, int64_t i) {
  uint16_t h;
  std::memcpy(&h, t.data + i * 2, 2);
  return bf16_to_float(h);
}

// Mismatching codes and scales of matrix g of `in` (bf16 [.., N, K]) against the reference
// quantizer at decode scale `decode` (encode = 1 / decode, one fp32 division).
int64_t reference_mismatches(const format::TensorInfo& in, const format::TensorInfo& packed,
                             const format::TensorInfo& scales, int64_t g, float decode) {
  const int64_t n_elems = in.shape[in.shape.rank - 2] * in.shape[in.shape.rank - 1];
  const float encode = static_cast<float>(1.0 / double(decode));
  int64_t mismatches = 0;
  float block[16];
  for (int64_t b = g * n_elems / 16; b < (g + 1) * n_elems / 16; ++b) {
    for (int i = 0; i < 16; ++i) block[i] = bf16_at(in, b * 16 + i);
    const dsv4::testing::ReferenceBlock ref =
        dsv4::testing::reference_quantize_block(block, encode);
    mismatches += scales.data[b] != ref.scale;
    for (int i = 0; i < 16; ++i) {
      const uint8_t byte = packed.data[b * 8 + i / 2];
      mismatches += (i % 2 == 0 ? (byte & 0xf) : (byte >> 4)) != ref.codes[i];
    }
  }
  return mismatches;
}

float bf16_amax(const format::TensorInfo& t, int64_t first, int64_t n) {
  float amax = 0;
  for (int64_t i = first; i < first + n; ++i) amax = std::fmax(amax, std::fabs(bf16_at(t, i)));
  return amax;
}

TEST(QuantizeTest, PerExpertNamesMatchTheReferenceAndShareW13Scales) {
  TempDir out;
  const std::string in_dir = golden_model("tiny_a_pretrained");
  Result<QuantizeSummary> summary =
      quantize_checkpoint(in_dir, out.file("q"), QuantizeOptions{false, 0.0125f, false, {}});
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  EXPECT_EQ(summary->convention, NamingConvention::kPretrained);
  const format::SafetensorsFile in = open_file(in_dir + "/model.safetensors");
  const format::SafetensorsFile q = open_file(out.file("q/model.safetensors"));
  const std::string e = "model.layers.2.ffn.experts.3.";
  const format::TensorInfo* w1 = in.find(e + "w1.weight");
  const format::TensorInfo* w3 = in.find(e + "w3.weight");
  ASSERT_TRUE(w1 && w3);
  const float shared = static_cast<float>(double(std::fmax(bf16_amax(*w1, 0, w1->shape.numel()),
                                                           bf16_amax(*w3, 0, w3->shape.numel()))) /
                                          2688.0);
  for (const char* m : {"w1", "w3"}) {
    const std::string name = e + m;
    const format::TensorInfo* packed = q.find(name + ".weight");
    const format::TensorInfo* scale = q.find(name + ".weight_scale");
    const format::TensorInfo* global = q.find(name + ".weight_scale_2");
    const format::TensorInfo* input = q.find(name + ".input_scale");
    ASSERT_TRUE(packed && scale && global && input) << name;
    EXPECT_EQ(packed->dtype, DType::kU8);
    EXPECT_EQ(packed->shape, Shape({w1->shape[0], w1->shape[1] / 2}));
    EXPECT_EQ(scale->dtype, DType::kF8E4M3);
    EXPECT_EQ(scale->shape, Shape({w1->shape[0], w1->shape[1] / 16}));
    EXPECT_EQ(global->shape.rank, 0);
    EXPECT_EQ(f32_at(*global, 0), shared) << name << ": w1 and w3 share max(amax) / 2688";
    EXPECT_EQ(f32_at(*input, 0), 0.0125f);
    EXPECT_EQ(reference_mismatches(*in.find(name + ".weight"), *packed, *scale, 0, shared), 0);
  }
  // Not an expert: copied byte for byte.
  const format::TensorInfo* before = in.find("model.layers.2.attn.wq_a.weight");
  const format::TensorInfo* after = q.find("model.layers.2.attn.wq_a.weight");
  ASSERT_TRUE(before && after);
  EXPECT_EQ(after->dtype, before->dtype);
  EXPECT_EQ(std::memcmp(before->data, after->data, before->bytes), 0);
  EXPECT_EQ(q.find("model.layers.2.attn.wq_a.weight_scale"), nullptr);
}

TEST(QuantizeTest, FusedStacksTakeUnderscoreNamesAndPerExpertScales) {
  TempDir out;
  const std::string in_dir = golden_model("tiny_a_state_dict");
  ASSERT_TRUE(
      quantize_checkpoint(in_dir, out.file("q"), QuantizeOptions{false, 0.5f, false, {}}).ok());
  const format::SafetensorsFile in = open_file(in_dir + "/model.safetensors");
  const format::SafetensorsFile q = open_file(out.file("q/model.safetensors"));
  const std::string name = "model.layers.3.mlp.experts.gate_up_proj";
  const format::TensorInfo* w = in.find(name);
  const format::TensorInfo* global = q.find(name + "_weight_scale_2");
  ASSERT_TRUE(w && global && q.find(name + "_weight_scale") && q.find(name + "_input_scale"));
  const int64_t n_experts = w->shape[0], n_elems = w->shape[1] * w->shape[2];
  EXPECT_EQ(global->shape, Shape({n_experts}));
  for (int64_t g = 0; g < n_experts; ++g) {
    const float decode = static_cast<float>(double(bf16_amax(*w, g * n_elems, n_elems)) / 2688.0);
    EXPECT_EQ(f32_at(*global, g), decode) << "expert " << g;
    EXPECT_EQ(reference_mismatches(*w, *q.find(name), *q.find(name + "_weight_scale"), g, decode),
              0);
  }
}

// A calibration pass that gives `scales`.
std::function<Result<ExpertInputScales>()> calibrated_as(const ExpertInputScales& scales) {
  return [scales] { return Result<ExpertInputScales>(scales); };
}

// Distinct calibrated scales for every (layer, expert): gate-up 1e-3 · (1 + layer + expert / 64),
// down twice that.
ExpertInputScales distinct_scales(int64_t n_layers, int64_t n_experts) {
  ExpertInputScales scales;
  for (int64_t layer = 0; layer < n_layers; ++layer) {
    scales.gate_up.emplace_back();
    scales.down.emplace_back();
    for (int64_t e = 0; e < n_experts; ++e) {
      const float s = 1e-3f * (1.0f + static_cast<float>(layer) + static_cast<float>(e) / 64.0f);
      scales.gate_up.back().push_back(s);
      scales.down.back().push_back(2.0f * s);
    }
  }
  return scales;
}

// Calibrated scales land on their own expert's input_scale, in both layouts: w1 and w3 (or the
// fused gate_up stack) take the gate-up one, w2 the down one; with --all-linears the other
// linears take the static one.
TEST(QuantizeTest, CalibratedScalesLandOnTheirExperts) {
  for (const char* model : {"tiny_a_pretrained", "tiny_a_state_dict"}) {
    TempDir out;
    const std::string in_dir = golden_model(model);
    Result<ModelConfig> config = load_model_config(in_dir);
    ASSERT_TRUE(config.ok());
    const ExpertInputScales scales = distinct_scales(config->n_layer, config->n_routed_experts);
    const QuantizeOptions options{true, 0.25f, false, calibrated_as(scales)};
    ASSERT_TRUE(quantize_checkpoint(in_dir, out.file("q"), options).ok()) << model;
    const format::SafetensorsFile q = open_file(out.file("q/model.safetensors"));
    const int64_t layer = 2, e = 3;
    if (q.find("model.layers.2.ffn.experts.3.w1.input_scale") != nullptr) {
      const std::string stem = "model.layers.2.ffn.experts.3.";
      EXPECT_EQ(f32_at(*q.find(stem + "w1.input_scale"), 0), scales.gate_up[layer][e]);
      EXPECT_EQ(f32_at(*q.find(stem + "w3.input_scale"), 0), scales.gate_up[layer][e]);
      EXPECT_EQ(f32_at(*q.find(stem + "w2.input_scale"), 0), scales.down[layer][e]);
      EXPECT_EQ(f32_at(*q.find("model.layers.2.attn.wq_a.input_scale"), 0), 0.25f);
    } else {
      const std::string stem = "model.layers.2.mlp.experts.";
      const format::TensorInfo* gate_up = q.find(stem + "gate_up_proj_input_scale");
      const format::TensorInfo* down = q.find(stem + "down_proj_input_scale");
      ASSERT_TRUE(gate_up && down) << model;
      for (int64_t g = 0; g < config->n_routed_experts; ++g) {
        EXPECT_EQ(f32_at(*gate_up, g), scales.gate_up[layer][g]) << "expert " << g;
        EXPECT_EQ(f32_at(*down, g), scales.down[layer][g]) << "expert " << g;
      }
      EXPECT_EQ(f32_at(*q.find("model.layers.2.self_attn.q_a_proj.input_scale"), 0), 0.25f);
    }
  }
}

// Calibrated scales must cover every layer and expert with usable values, and the static scale
// is still needed where they do not reach (--all-linears).
TEST(QuantizeTest, RefusesCalibratedScalesThatDoNotFit) {
  TempDir out;
  const std::string in_dir = golden_model("tiny_a_state_dict");
  Result<ModelConfig> config = load_model_config(in_dir);
  ASSERT_TRUE(config.ok());
  const ExpertInputScales good = distinct_scales(config->n_layer, config->n_routed_experts);
  EXPECT_TRUE(quantize_checkpoint(in_dir, out.file("q"),
                                  QuantizeOptions{false, 0.0f, false, calibrated_as(good)})
                  .ok());
  ExpertInputScales short_layers = good;
  short_layers.down.pop_back();
  ExpertInputScales short_experts = good;
  short_experts.gate_up[1].pop_back();
  ExpertInputScales non_finite = good;
  non_finite.down[2][4] = NAN;
  ExpertInputScales zero = good;
  zero.gate_up[0][0] = 0.0f;
  for (const ExpertInputScales* bad : {&short_layers, &short_experts, &non_finite, &zero}) {
    Result<QuantizeSummary> r = quantize_checkpoint(
        in_dir, out.file("r"), QuantizeOptions{false, 0.0f, false, calibrated_as(*bad)});
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  }
  Result<QuantizeSummary> no_static = quantize_checkpoint(
      in_dir, out.file("r"), QuantizeOptions{true, 0.0f, false, calibrated_as(good)});
  EXPECT_EQ(no_static.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_static.status().message().find("routed experts only"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(out.file("r")));

  // The pass is long, so it runs only once every cheap check has passed: not for an output
  // directory that is in use, nor for experts stored quantized (it would calibrate nothing).
  int passes = 0;
  const auto counted = [&passes, &good] {
    ++passes;
    return Result<ExpertInputScales>(good);
  };
  std::filesystem::create_directories(out.file("used"));
  std::ofstream(out.file("used/keep.txt")) << "mine";
  EXPECT_FALSE(
      quantize_checkpoint(in_dir, out.file("used"), QuantizeOptions{false, 0.0f, false, counted})
          .ok());
  ASSERT_TRUE(
      quantize_checkpoint(in_dir, out.file("nvfp4"), QuantizeOptions{false, 0.01f, false, {}})
          .ok());
  Result<QuantizeSummary> quantized = quantize_checkpoint(
      out.file("nvfp4"), out.file("again"), QuantizeOptions{false, 0.0f, false, counted});
  EXPECT_EQ(quantized.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(quantized.status().message().find("stored quantized"), std::string::npos);
  EXPECT_EQ(passes, 0);
}

// The output binds cleanly under the loader, and its dequantized experts are the originals up to
// NVFP4's quantization error (relative RMS 0.095 on Gaussian-like weights, nvfp4.md §5.2).
TEST(QuantizeTest, OutputBindsAndDequantizesCloseToTheInput) {
  for (const char* name : {"tiny_c_pretrained", "tiny_b_state_dict"}) {
    SCOPED_TRACE(name);
    TempDir out;
    ASSERT_TRUE(quantize_checkpoint(golden_model(name), out.file("q"),
                                    QuantizeOptions{true, 0.01f, false, {}})
                    .ok());
    Result<LoadedModel> original = load_model(golden_model(name));
    Result<LoadedModel> packed = load_model(out.file("q"));
    LoadOptions dense_options;
    dense_options.keep_fp4_packed = false;
    Result<LoadedModel> dequantized = load_model(out.file("q"), dense_options);
    ASSERT_TRUE(original.ok() && packed.ok() && dequantized.ok());
    EXPECT_TRUE(packed->report.clean())
        << (packed->report.problems.empty() ? "" : packed->report.problems[0]);
    const RoutedExpertWeights& experts = packed->weights.layers[2].ffn.experts;
    ASSERT_TRUE(experts.is_nvfp4());
    EXPECT_EQ(experts.w13_nvfp4->input_scale.data_as<float>()[0], 0.01f);
    const Tensor& a = original->weights.layers[2].ffn.experts.w13;
    const Tensor& b = dequantized->weights.layers[2].ffn.experts.w13;
    ASSERT_EQ(a.numel(), b.numel());
    double err = 0, ref = 0;
    for (int64_t i = 0; i < a.numel(); ++i) {
      const double d = double(b.data_as<float>()[i]) - a.data_as<float>()[i];
      err += d * d;
      ref += double(a.data_as<float>()[i]) * a.data_as<float>()[i];
    }
    EXPECT_LT(std::sqrt(err / ref), dsv4::testing::kNvfp4WeightRelRmsTol);
    EXPECT_GT(std::sqrt(err / ref), 0.0);  // it did quantize
  }
}

TEST(QuantizeTest, ConfigGainsQuantizationConfigAndOtherFilesAreCopied) {
  TempDir out;
  const std::string in_dir = golden_model("tiny_a_pretrained");
  ASSERT_TRUE(
      quantize_checkpoint(in_dir, out.file("q"), QuantizeOptions{false, 0.01f, false, {}}).ok());
  std::ifstream config_file(out.file("q/config.json"));
  const std::string text((std::istreambuf_iterator<char>(config_file)),
                         std::istreambuf_iterator<char>());
  Result<format::Json> config = format::parse_json(text, "config.json");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ((*config)["quantization_config"]["quant_algo"], "NVFP4");
  EXPECT_EQ((*config)["quantization_config"]["group_size"], 16);
  EXPECT_EQ((*config)["hidden_size"], 128);
  EXPECT_TRUE(std::filesystem::exists(out.file("q/generation_config.json")));
}

TEST(QuantizeTest, RefusesANonEmptyOutputUnlessForcedAndABadInputScale) {
  TempDir out;
  const std::string in_dir = golden_model("tiny_a_state_dict");
  std::filesystem::create_directories(out.file("q"));
  std::ofstream(out.file("q/keep.txt")) << "mine";
  Result<QuantizeSummary> refused =
      quantize_checkpoint(in_dir, out.file("q"), QuantizeOptions{false, 0.01f, false, {}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--force"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(out.file("q/model.safetensors")));
  EXPECT_TRUE(
      quantize_checkpoint(in_dir, out.file("q"), QuantizeOptions{false, 0.01f, true, {}}).ok());
  EXPECT_TRUE(std::filesystem::exists(out.file("q/keep.txt")));

  for (const float bad : {0.0f, -1.0f, NAN, INFINITY}) {
    Result<QuantizeSummary> r =
        quantize_checkpoint(in_dir, out.file("r"), QuantizeOptions{false, bad, false, {}});
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(quantize_checkpoint(in_dir, in_dir, QuantizeOptions{false, 0.01f, true, {}}).ok());
}

// A sharded input keeps its shards: each tensor, and each new scale tensor, lands in the shard
// its weight came from, and the index lists them all (the loader checks index against shards).
TEST(QuantizeTest, ShardedInputKeepsItsShardsAndIndex) {
  TempDir dir;
  const std::string golden = golden_model("tiny_a_state_dict");
  const format::SafetensorsFile single = open_file(golden + "/model.safetensors");
  std::vector<std::vector<dsv4::testing::TinyTensor>> shards(2);
  for (size_t i = 0; i < single.tensors().size(); ++i) {
    const format::TensorInfo& t = single.tensors()[i];
    shards[i % 2].push_back({t.name, t.dtype, t.shape, {t.data, t.data + t.bytes}});
  }
  std::mt19937_64 rng(1);  // unused: every tensor brings its bytes
  std::filesystem::create_directories(dir.file("in"));
  const Status written = dsv4::testing::write_tiny_sharded(dir.file("in"), shards, rng);
  ASSERT_TRUE(written.ok()) << written.to_string();
  std::filesystem::copy_file(golden + "/config.json", dir.file("in/config.json"));
  Result<QuantizeSummary> summary = quantize_checkpoint(dir.file("in"), dir.file("out"),
                                                        QuantizeOptions{false, 0.01f, false, {}});
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  EXPECT_EQ(summary->n_shards, 2u);
  Result<LoadedModel> model = load_model(dir.file("out"));
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_TRUE(model->report.clean());
  EXPECT_TRUE(model->weights.layers[0].ffn.experts.is_nvfp4());
  for (size_t s = 0; s < 2; ++s) {
    const format::SafetensorsFile out =
        open_file(dir.file("out/" + dsv4::format::shard_file_name(s, 2)));
    for (const dsv4::testing::TinyTensor& t : shards[s]) {
      ASSERT_NE(out.find(t.name), nullptr) << t.name;
      if (t.name.ends_with("gate_up_proj")) {
        EXPECT_NE(out.find(t.name + "_weight_scale"), nullptr) << t.name;
      }
    }
  }
}

}  // namespace
}  // namespace dsv4::checkpoint

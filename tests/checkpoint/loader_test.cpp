// load_model on synthetic checkpoints written to disk: every convention and quantized layout
// binds with zero problems and decodes to the float64 reference of synthetic_checkpoint.h
// (exactly: each stored form is one rounding away from its exact value); NVFP4 experts stay
// packed when asked; all-zero, NaN, mismatched-global-scale and out-of-range inputs are reported
// with slot and key.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "base/float_convert.h"
#include "checkpoint/loader_fixture.h"
#include "format/nvfp4.h"
#include "testing/source_dir.h"

namespace dsv4::checkpoint {
namespace {

using testing::ExpertForm;
using testing::LinearForm;
using testing::NamedShape;
using testing::SyntheticCheckpoint;

struct LayoutCase {
  const char* name;
  LinearForm linear;
  ExpertForm experts;
};
void PrintTo(const LayoutCase& c, std::ostream* os) { *os << c.name; }

class OfficialLayoutTest : public LoaderTest, public ::testing::WithParamInterface<LayoutCase> {};

TEST_P(OfficialLayoutTest, BindsCleanAndDecodesToTheReference) {
  const SyntheticCheckpoint ckpt = official({GetParam().linear, GetParam().experts, true});
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson, dense_experts());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  expect_clean(model->report);
  EXPECT_EQ(model->report.convention, NamingConvention::kOfficial);
  EXPECT_EQ(model->report.official_count_expected, model->report.official_count_found);
  expect_official_values(ckpt, model->weights);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, OfficialLayoutTest,
    ::testing::Values(LayoutCase{"bf16", LinearForm::kBf16, ExpertForm::kBf16},
                      LayoutCase{"release_fp8_e8m0_fp4", LinearForm::kFp8E8m0, ExpertForm::kMxfp4},
                      LayoutCase{"base_fp8_f32_scales", LinearForm::kFp8F32, ExpertForm::kFp8F32},
                      LayoutCase{"modelopt_nvfp4", LinearForm::kFp8E8m0, ExpertForm::kNvfp4}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

// keep_fp8 (what load_model_on asks for a GPU): the release layout's FP8 linears (E8M0 scales)
// stay as stored, the codes byte for byte and the scales as f32, decoding to the reference; the
// plan counts them at a byte a value; what is not a dense linear (the embedding) is f32 as ever.
TEST_F(LoaderTest, KeepFp8KeepsPowerOfTwoScaledLinearsAsStored) {
  const SyntheticCheckpoint ckpt = official({LinearForm::kFp8E8m0, ExpertForm::kNvfp4, true});
  LoadOptions options;
  options.keep_fp8 = true;
  LoadPlan plan;
  options.before_decode = [&plan](const LoadPlan& p) {
    plan = p;
    return ok_status();
  };
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson, options);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  expect_clean(model->report);
  const int64_t d = config_.hidden_size;
  for (const auto& [weight, name, n, k] :
       {std::tuple{&model->weights.layers[1].attn.wq_a, "layers.1.attn.wq_a.weight", int64_t{32},
                   d},
        {&model->weights.layers[2].attn.wo_b, "layers.2.attn.wo_b.weight", d, 32},
        {&model->weights.mtp[0].e_proj, "mtp.0.e_proj.weight", d, d}}) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(weight->is_fp8());
    const std::vector<uint8_t>& stored = ckpt.at(name).bytes;
    ASSERT_EQ(weight->numel(), static_cast<int64_t>(stored.size()));
    EXPECT_TRUE(std::equal(stored.begin(), stored.end(), weight->data_as<const uint8_t>()));
    const format::Fp8BlockView view = weight->fp8_view();
    std::vector<float> decoded(stored.size());
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < k; ++c) {
        decoded[r * k + c] = e4m3_to_float(view.values[r * k + c]) *
                             view.block_scales[r / 128 * view.scale_cols() + c / 128];
      }
    }
    expect_matches(decoded.data(), ckpt.matrix(name, n, k), name);
  }
  EXPECT_EQ(model->weights.embed.dtype(), DType::kF32);
  EXPECT_GT(plan.fp8_bytes, 0);
}

// Scales that are not powers of two (the Base layout's f32 scales, random here) would not decode
// to bf16-exact values inside the kernels: those linears are decoded to f32 as without keep_fp8.
TEST_F(LoaderTest, KeepFp8DecodesLinearsWhoseScalesAreNotPowersOfTwo) {
  const SyntheticCheckpoint ckpt = official({LinearForm::kFp8F32, ExpertForm::kFp8F32, true});
  LoadOptions options = dense_experts();
  options.keep_fp8 = true;
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson, options);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  expect_clean(model->report);
  expect_official_values(ckpt, model->weights);
}

TEST_F(LoaderTest, Nvfp4ExpertsStayPackedAndDequantizeToTheReference) {
  const SyntheticCheckpoint ckpt = official({LinearForm::kFp8E8m0, ExpertForm::kNvfp4, true});
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  expect_clean(model->report);
  for (int64_t l = 0; l < config_.n_layer; ++l) {
    const RoutedExpertWeights& experts = model->weights.layers[static_cast<size_t>(l)].ffn.experts;
    ASSERT_TRUE(experts.is_nvfp4() && experts.w2_nvfp4.has_value());
    EXPECT_TRUE(experts.w13.empty_tensor());
    float largest_w13 = 0.0f, largest_w2 = 0.0f;  // the per-expert calibrations differ
    for (int64_t e = 0; e < config_.n_routed_experts; ++e) {
      const std::string expert = official_expert(l, e);
      float input_scale, w2_input_scale;
      std::memcpy(&input_scale, ckpt.at(expert + ".w1.input_scale").bytes.data(), 4);
      std::memcpy(&w2_input_scale, ckpt.at(expert + ".w2.input_scale").bytes.data(), 4);
      EXPECT_EQ(experts.w13_nvfp4->input_scale.data_as<float>()[e], input_scale);
      largest_w13 = std::max(largest_w13, input_scale);
      largest_w2 = std::max(largest_w2, w2_input_scale);
    }
    // W4A4's static scales: the largest calibration of each stack, one f32 each.
    ASSERT_EQ(experts.w13_input_scale.numel(), 1);
    ASSERT_EQ(experts.w2_input_scale.numel(), 1);
    EXPECT_EQ(experts.w13_input_scale.data_as<float>()[0], largest_w13);
    EXPECT_EQ(experts.w2_input_scale.data_as<float>()[0], largest_w2);
    Result<Tensor> dense = format::dequantize_ref(experts.w13_nvfp4->view());
    ASSERT_TRUE(dense.ok()) << dense.status().to_string();
    expect_matches(*dense, official_w13(ckpt, l), "layer " + std::to_string(l) + " packed w13");
  }
}

TEST_F(LoaderTest, PackedFp4IndexerWeightsProjIsUnpackedLikeEveryOtherWeight) {
  std::vector<NamedShape> list = testing::official_inventory(config_);
  const std::string name = "layers.1.attn.indexer.weights_proj";
  const int64_t hi = config_.index_n_heads, d = config_.hidden_size;
  std::erase_if(list, [&](const NamedShape& t) { return t.name == name + ".weight"; });
  list.push_back({name + ".weight", DType::kU8, {hi, d / 2}});  // the real-world [64, 3584] case
  list.push_back({name + ".weight_scale", DType::kF8E4M3, {hi, d / 16}});
  list.push_back({name + ".weight_scale_2", DType::kF32, Shape{}});
  const SyntheticCheckpoint ckpt(list, config_.n_routed_experts, rng_.engine());
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  expect_clean(model->report);
  const Tensor& got = model->weights.layers[1].attn.indexer->weights_proj;
  EXPECT_EQ(got.shape(), (Shape{hi, d}));
  expect_matches(got, ckpt.matrix(name + ".weight", hi, d), "indexer.weights_proj");
}

// ---- transformers layouts: the golden key lists with quantized experts ----

class TransformersLayoutTest : public LoaderTest {
 protected:
  std::string golden(const std::string& name) {
    return dsv4::testing::source_path("tests/golden/" + name);
  }
  void use_golden_config(const std::string& name) {
    config_json_ = testing::read_text(golden(name) + "/model/config.json");
    config_ = testing::parsed_config(config_json_, name);
  }
  std::string config_json_;
};

TEST_F(TransformersLayoutTest, StateDictFusedModelOptNvfp4Experts) {
  use_golden_config("tiny_a_state_dict");
  std::vector<NamedShape> list = testing::golden_keys(golden("tiny_a_state_dict") + "/keys.txt");
  const int64_t e = config_.n_routed_experts;
  std::vector<NamedShape> fused;
  for (NamedShape& t : list) {
    if (!t.name.ends_with("mlp.experts.gate_up_proj") && !t.name.ends_with("mlp.experts.down_proj"))
      continue;
    const int64_t n = t.shape[1], k = t.shape[2];
    t = {t.name, DType::kU8, {e, n, k / 2}};
    fused.push_back({t.name + "_weight_scale", DType::kF8E4M3, {e, n, k / 16}});
    fused.push_back({t.name + "_weight_scale_2", DType::kF32, {e}});
    fused.push_back({t.name + "_input_scale", DType::kF32, {e}});
  }
  list.insert(list.end(), fused.begin(), fused.end());
  const SyntheticCheckpoint ckpt(list, e, rng_.engine());
  Result<LoadedModel> model = write_and_load(ckpt, config_json_, dense_experts());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  expect_clean(model->report);
  EXPECT_EQ(model->report.convention, NamingConvention::kStateDict);
  const int64_t d = config_.hidden_size, f = config_.moe_intermediate_size;
  expect_matches(model->weights.layers[2].ffn.experts.w13,
                 ckpt.matrix("model.layers.2.mlp.experts.gate_up_proj", 2 * f, d), "fused w13");
  expect_matches(model->weights.layers[2].ffn.experts.w2,
                 ckpt.matrix("model.layers.2.mlp.experts.down_proj", d, f), "fused w2");
}

TEST_F(TransformersLayoutTest, PretrainedPerExpertMxfp4Experts) {
  use_golden_config("tiny_c_pretrained");
  std::vector<NamedShape> list = testing::golden_keys(golden("tiny_c_pretrained") + "/keys.txt");
  std::vector<NamedShape> scales;
  for (NamedShape& t : list) {
    if (t.name.find(".ffn.experts.") == std::string::npos) continue;
    const int64_t n = t.shape[0], k = t.shape[1];
    t = {t.name, DType::kI8, {n, k / 2}};
    scales.push_back({t.name.substr(0, t.name.size() - 7) + ".scale", DType::kF8E8M0, {n, k / 32}});
  }
  list.insert(list.end(), scales.begin(), scales.end());
  const SyntheticCheckpoint ckpt(list, config_.n_routed_experts, rng_.engine());
  Result<LoadedModel> model = write_and_load(ckpt, config_json_, dense_experts());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  expect_clean(model->report);
  EXPECT_EQ(model->report.convention, NamingConvention::kPretrained);
  const int64_t d = config_.hidden_size, f = config_.moe_intermediate_size;
  const std::string p = "model.layers.1.ffn.experts.2.";
  const std::vector<double> w13 =
      concat(ckpt.matrix(p + "w1.weight", f, d), ckpt.matrix(p + "w3.weight", f, d));
  expect_matches(model->weights.layers[1].ffn.experts.w13.data_as<float>() + 2 * 2 * f * d, w13,
                 "expert 2 w13");
  EXPECT_TRUE(model->weights.mtp.empty());  // transformers drops the MTP block on save
}

// A save_pretrained model with the MTP block beside it under its official names (what a trainer
// that keeps the MTP weights writes) loads both.
TEST_F(TransformersLayoutTest, PretrainedModelWithOfficialMtpTensors) {
  use_golden_config("tiny_a_pretrained");
  std::vector<NamedShape> list = testing::golden_keys(golden("tiny_a_pretrained") + "/keys.txt");
  for (const NamedShape& t :
       testing::official_inventory(config_, {LinearForm::kBf16, ExpertForm::kBf16, true})) {
    if (t.name.starts_with("mtp.")) list.push_back(t);
  }
  const SyntheticCheckpoint ckpt(list, config_.n_routed_experts, rng_.engine());
  Result<LoadedModel> model = write_and_load(ckpt, config_json_, dense_experts());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  expect_clean(model->report);
  EXPECT_EQ(model->report.convention, NamingConvention::kPretrained);
  ASSERT_EQ(model->weights.mtp.size(), 1u);
  const MtpWeights& mtp = model->weights.mtp[0];
  const int64_t d = config_.hidden_size;
  expect_matches(mtp.e_proj, ckpt.matrix("mtp.0.e_proj.weight", d, d), "mtp e_proj");
  expect_matches(mtp.h_proj, ckpt.matrix("mtp.0.h_proj.weight", d, d), "mtp h_proj");
  expect_matches(mtp.hnorm, ckpt.matrix("mtp.0.hnorm.weight", 1, d), "mtp hnorm");
  expect_matches(mtp.block.attn.wkv, ckpt.matrix("mtp.0.attn.wkv.weight", config_.head_dim, d),
                 "mtp wkv");
  EXPECT_FALSE(mtp.block.attn.compressor.has_value());
  EXPECT_FALSE(mtp.block.ffn.bias.empty_tensor());
}

// on_layer_loaded: once for the globals and once per layer, each time with that layer whole (its
// static input scales set), in binding order; what the callback frees stays freed.
TEST_F(LoaderTest, OnLayerLoadedSeesEachLayerOnceWhole) {
  const SyntheticCheckpoint ckpt = official({LinearForm::kFp8E8m0, ExpertForm::kNvfp4, true});
  std::vector<int64_t> seen;
  LoadOptions options;
  options.on_layer_loaded = [&](ModelWeights& w, int64_t layer) {
    seen.push_back(layer);
    if (layer < 0) {
      EXPECT_FALSE(w.embed.empty_tensor() || w.head.empty_tensor() || w.hc_head.fn.empty_tensor());
      return ok_status();
    }
    const LayerWeights& l = w.block(layer);
    EXPECT_FALSE(l.attn.wq_a.empty_tensor() || l.attn.wo_b.empty_tensor() ||
                 l.ffn.shared_expert.w2.empty_tensor() || l.hc_ffn.fn.empty_tensor())
        << "layer " << layer;
    EXPECT_TRUE(l.ffn.experts.is_nvfp4()) << "layer " << layer;
    EXPECT_EQ(l.ffn.experts.w13_input_scale.numel(), 1) << "layer " << layer;
    if (layer >= config_.n_layer) {  // the MTP block, whole with its own tensors
      EXPECT_FALSE(w.mtp[0].e_proj.empty_tensor() || w.mtp[0].hc_head.scale.empty_tensor());
    }
    w.block(layer) = LayerWeights{};
    return ok_status();
  };
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson, options);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  expect_clean(model->report);
  EXPECT_EQ(seen, (std::vector<int64_t>{-1, 0, 1, 2, 3}));  // 3: the MTP block
  for (const LayerWeights& l : model->weights.layers) EXPECT_TRUE(l.attn.wq_a.empty_tensor());
  EXPECT_TRUE(model->weights.mtp[0].block.attn.wq_a.empty_tensor());
}

TEST_F(LoaderTest, AnErrorFromOnLayerLoadedStopsTheLoad) {
  const SyntheticCheckpoint ckpt = official({LinearForm::kBf16, ExpertForm::kBf16, true});
  LoadOptions options;
  options.on_layer_loaded = [](ModelWeights&, int64_t layer) {
    return layer == 1 ? resource_exhausted("out of device memory at layer 1") : ok_status();
  };
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson, options);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().message(), "out of device memory at layer 1");
}

// before_decode: the plan of a checkpoint with NVFP4 experts counts their packed bytes exactly
// (codes, a UE4M3 scale per 16, a global scale per expert), layer by layer, every tid2eid
// entry, and every other value; decoded to f32 instead, the experts move to the values. An
// error stops the load before a byte is decoded.
TEST_F(LoaderTest, BeforeDecodeSeesThePlanAndCanStopTheLoad) {
  const SyntheticCheckpoint ckpt = official({LinearForm::kFp8E8m0, ExpertForm::kNvfp4, true});
  const Status written = ckpt.write(dir_.path(), testing::kTinyConfigJson, rng_.engine());
  ASSERT_TRUE(written.ok()) << written.to_string();
  LoadPlan packed, dense;
  LoadOptions options;
  options.before_decode = [&](const LoadPlan& plan) {
    packed = plan;
    return ok_status();
  };
  ASSERT_TRUE(load_model(dir_.path(), options).ok());
  options = dense_experts();
  options.before_decode = [&](const LoadPlan& plan) {
    dense = plan;
    return ok_status();
  };
  ASSERT_TRUE(load_model(dir_.path(), options).ok());
  const int64_t e = config_.n_routed_experts, d = config_.hidden_size,
                f = config_.moe_intermediate_size,
                n_layers = config_.n_layer + config_.n_mtp_layers;  // the MTP block's experts too
  const int64_t per_layer = e * 2 * f * (d / 2 + d / 16) + 4 * e + e * d * (f / 2 + f / 16) + 4 * e;
  EXPECT_EQ(packed.packed_expert_bytes, n_layers * per_layer);
  EXPECT_EQ(packed.expert_packed_bytes,
            std::vector<int64_t>(static_cast<size_t>(n_layers), per_layer));
  EXPECT_EQ(dense.packed_expert_bytes, 0);
  EXPECT_EQ(dense.value_elements, packed.value_elements + n_layers * 3 * e * f * d);
  EXPECT_EQ(packed.index_elements, config_.vocab_size * config_.n_expert_used);  // layer 0
  EXPECT_EQ(packed.min_device_bytes(),
            packed.packed_expert_bytes + 2 * packed.value_elements + 8 * packed.index_elements);
  // plan_model binds without decoding and gives the same plan.
  const Result<LoadPlan> planned = plan_model(dir_.path());
  ASSERT_TRUE(planned.ok()) << planned.status().to_string();
  EXPECT_EQ(planned->min_device_bytes(), packed.min_device_bytes());
  EXPECT_EQ(planned->expert_packed_bytes, packed.expert_packed_bytes);
  EXPECT_EQ(planned->expert_bulk_bytes, packed.expert_bulk_bytes);
  EXPECT_EQ(planned->n_layer, config_.n_layer);
  EXPECT_EQ(planned->first_problem, "");

  size_t n_decoded = 0;
  options.progress = [&](size_t, size_t) { ++n_decoded; };
  options.before_decode = [](const LoadPlan&) { return resource_exhausted("too large"); };
  const Result<LoadedModel> stopped = load_model(dir_.path(), options);
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().message(), "too large");
  EXPECT_EQ(n_decoded, 0u);
}

// ---- Bad values: each reported with slot and key ----

TEST_F(LoaderTest, AllZeroWeightIsReported) {
  SyntheticCheckpoint ckpt = official({LinearForm::kBf16, ExpertForm::kBf16, false});
  std::fill(ckpt.at("layers.1.attn.wkv.weight").bytes.begin(),
            ckpt.at("layers.1.attn.wkv.weight").bytes.end(), 0);
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson);
  ASSERT_TRUE(model.ok());
  ASSERT_EQ(model->report.zero_tensors.size(), 1u) << testing::joined(model->report.zero_tensors);
  EXPECT_TRUE(model->report.zero_tensors[0].starts_with(
      "layer 1 attn.wkv (key layers.1.attn.wkv.weight in "))
      << model->report.zero_tensors[0];
  EXPECT_FALSE(model->report.clean());
}

TEST_F(LoaderTest, OneAllZeroExpertIsReportedByItself) {
  SyntheticCheckpoint ckpt = official({LinearForm::kFp8E8m0, ExpertForm::kMxfp4, false});
  std::vector<uint8_t>& packed = ckpt.at("layers.2.ffn.experts.3.w2.weight").bytes;
  std::fill(packed.begin(), packed.end(), 0);
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson);
  ASSERT_TRUE(model.ok());
  ASSERT_EQ(model->report.zero_tensors.size(), 1u) << testing::joined(model->report.zero_tensors);
  EXPECT_TRUE(
      model->report.zero_tensors[0].starts_with("layer 2 ffn.experts.w2 expert 3 (key "
                                                "layers.2.ffn.experts.3.w2.weight"));
}

TEST_F(LoaderTest, ZeroBalancingBiasIsAllowed) {
  SyntheticCheckpoint ckpt = official({LinearForm::kBf16, ExpertForm::kBf16, false});
  std::fill(ckpt.at("layers.1.ffn.gate.bias").bytes.begin(),
            ckpt.at("layers.1.ffn.gate.bias").bytes.end(), 0);
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson);
  ASSERT_TRUE(model.ok());
  expect_clean(model->report);
}

TEST_F(LoaderTest, NanWeightIsReported) {
  SyntheticCheckpoint ckpt = official({LinearForm::kBf16, ExpertForm::kBf16, false});
  std::vector<uint8_t>& bytes = ckpt.at("layers.2.attn.compressor.wgate.weight").bytes;
  bytes[10] = 0xc0;  // bf16 0x7fc0: a quiet NaN at element 5
  bytes[11] = 0x7f;
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson);
  ASSERT_TRUE(model.ok());
  ASSERT_EQ(model->report.non_finite_tensors.size(), 1u);
  EXPECT_TRUE(model->report.non_finite_tensors[0].starts_with(
      "layer 2 attn.compressor.wgate (key layers.2.attn.compressor.wgate.weight in "))
      << model->report.non_finite_tensors[0];
  EXPECT_FALSE(model->report.clean());
}

TEST_F(LoaderTest, MismatchedW1W3GlobalScalesAreAnError) {
  SyntheticCheckpoint ckpt = official({LinearForm::kFp8E8m0, ExpertForm::kNvfp4, false});
  const float other = 0.5f;
  std::memcpy(ckpt.at("layers.1.ffn.experts.2.w3.weight_scale_2").bytes.data(), &other, 4);
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson);
  ASSERT_TRUE(model.ok());
  ASSERT_EQ(model->report.problems.size(), 1u) << testing::joined(model->report.problems);
  EXPECT_TRUE(model->report.problems[0].starts_with(
      "layer 1 ffn.experts.w13 expert 2: w1 and w3 NVFP4 global scales differ"))
      << model->report.problems[0];
  EXPECT_NE(model->report.problems[0].find("layers.1.ffn.experts.2.w3.weight_scale_2"),
            std::string::npos);
}

TEST_F(LoaderTest, ExpertIdOutOfRangeIsAnError) {
  SyntheticCheckpoint ckpt = official({LinearForm::kBf16, ExpertForm::kBf16, false});
  const int64_t bad = config_.n_routed_experts;
  std::memcpy(ckpt.at("layers.0.ffn.gate.tid2eid").bytes.data() + 8 * 7, &bad, 8);
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson);
  ASSERT_TRUE(model.ok());
  ASSERT_EQ(model->report.problems.size(), 1u);
  EXPECT_TRUE(
      model->report.problems[0].starts_with("layer 0 ffn.tid2eid (key layers.0.ffn.gate.tid2eid"));
  EXPECT_NE(model->report.problems[0].find("expert id 4 at element 7 is outside [0, 4)"),
            std::string::npos);
}

// §5 item 24: tid2eid is I64 in the release, int32 in other exporters; any integer dtype binds.
TEST_F(LoaderTest, Tid2eidOfAnyIntegerDtypeBecomesI64) {
  std::vector<NamedShape> list =
      testing::official_inventory(config_, {LinearForm::kBf16, ExpertForm::kBf16, false});
  for (NamedShape& t : list) {
    if (t.name == "layers.0.ffn.gate.tid2eid") t.dtype = DType::kI32;
  }
  const SyntheticCheckpoint ckpt(list, config_.n_routed_experts, rng_.engine());
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson);
  ASSERT_TRUE(model.ok());
  expect_clean(model->report);
  const Tensor& ids = model->weights.layers[0].ffn.tid2eid;
  ASSERT_EQ(ids.dtype(), DType::kI64);
  const std::vector<uint8_t>& stored = ckpt.at("layers.0.ffn.gate.tid2eid").bytes;
  for (int64_t i = 0; i < ids.numel(); ++i) {
    int32_t want;
    std::memcpy(&want, stored.data() + 4 * i, 4);
    ASSERT_EQ(ids.data_as<int64_t>()[i], want) << "element " << i;
  }
}

TEST_F(LoaderTest, CheckModelReportsWhatLoadModelReports) {
  SyntheticCheckpoint ckpt = official({LinearForm::kFp8E8m0, ExpertForm::kMxfp4, true});
  std::vector<uint8_t>& bytes = ckpt.at("norm.weight").bytes;
  std::fill(bytes.begin(), bytes.end(), 0);
  Result<LoadedModel> model = write_and_load(ckpt, testing::kTinyConfigJson);
  size_t n_progress = 0;
  LoadOptions options;
  options.progress = [&](size_t, size_t) { ++n_progress; };
  Result<LoadReport> checked = check_model(dir_.path(), options);
  ASSERT_TRUE(model.ok() && checked.ok());
  EXPECT_EQ(checked->zero_tensors, model->report.zero_tensors);
  EXPECT_EQ(checked->zero_tensors.size(), 1u);
  EXPECT_EQ(checked->n_bound, model->report.n_bound);
  EXPECT_EQ(checked->ignored.size(), model->report.ignored.size());
  EXPECT_GT(n_progress, 0u);
}

}  // namespace
}  // namespace dsv4::checkpoint

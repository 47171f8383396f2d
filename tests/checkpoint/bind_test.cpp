// bind_tensors on header-only name lists: the full official V4-Flash and V4-Pro inventories
// (69,187 and 145,116 tensors, §3.1.4) and the golden keys bind completely; every kind of bad
// input is a problem that names the slot and the key.
#include <gtest/gtest.h>

#include <algorithm>

#include "checkpoint/tiny_model.h"
#include "testing/source_dir.h"

namespace dsv4::checkpoint {
namespace {

using testing::ExpertForm;
using testing::HeaderList;
using testing::LinearForm;
using testing::NamedShape;

ModelConfig fixture(const std::string& file) {
  const std::string path = dsv4::testing::source_path("tests/checkpoint/fixtures/" + file);
  return testing::parsed_config(testing::read_text(path), path);
}

bool has(const std::vector<std::string>& lines, const std::string& needle) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
    return line.find(needle) != std::string::npos;
  });
}

struct ReleaseCase {
  const char* config_file;
  size_t n_tensors;
  size_t n_mtp;
};

class ReleaseNameListTest : public ::testing::TestWithParam<ReleaseCase> {};

TEST_P(ReleaseNameListTest, BindsCompletely) {
  const ModelConfig config = fixture(GetParam().config_file);
  const std::vector<NamedShape> list = testing::official_inventory(config);
  ASSERT_EQ(list.size(), GetParam().n_tensors);
  Result<Binding> binding = HeaderList(list).bind(config);
  ASSERT_TRUE(binding.ok()) << binding.status().to_string();
  const LoadReport& report = binding->report;
  EXPECT_EQ(report.convention, NamingConvention::kOfficial);
  EXPECT_TRUE(report.problems.empty()) << testing::joined(report.problems);
  EXPECT_TRUE(report.ignored.empty());
  EXPECT_EQ(report.n_bound, GetParam().n_tensors);
  EXPECT_EQ(report.n_mtp_blocks, 1u);
  EXPECT_EQ(report.n_mtp_bound, GetParam().n_mtp);
  EXPECT_EQ(report.official_count_expected, report.official_count_found);
  EXPECT_EQ(report.official_count_expected, GetParam().n_tensors - GetParam().n_mtp);
  // Every routed expert matrix (the MTP block's too) is FP4 with its e8m0 scale; nothing else is.
  const size_t n_expert_matrices =
      static_cast<size_t>((config.n_layer + 1) * config.n_routed_experts * 3);
  EXPECT_EQ(report.storage_census.at(std::string(storage_form_name(StorageForm::kMxfp4))),
            n_expert_matrices);
  EXPECT_EQ(report.dtype_census.at("I64"), 3u);  // tid2eid of the three hash layers
}

INSTANTIATE_TEST_SUITE_P(Release, ReleaseNameListTest,
                         ::testing::Values(ReleaseCase{"v4_flash_config.json", 69187, 1575},
                                           ReleaseCase{"v4_pro_config.json", 145116, 2343}));

TEST(BindTest, GoldenKeyListsBindAsTheirLayout) {
  for (const char* name : {"tiny_a_pretrained", "tiny_a_state_dict", "tiny_e_pretrained"}) {
    const std::string dir = dsv4::testing::source_path(std::string("tests/golden/") + name);
    const ModelConfig config =
        testing::parsed_config(testing::read_text(dir + "/model/config.json"), name);
    Result<Binding> binding = HeaderList(testing::golden_keys(dir + "/keys.txt")).bind(config);
    ASSERT_TRUE(binding.ok()) << binding.status().to_string();
    EXPECT_TRUE(binding->report.problems.empty())
        << name << testing::joined(binding->report.problems);
  }
}

// ---- Bad input on the tiny config (official names, release storage) ----

class BadInputTest : public ::testing::Test {
 protected:
  LoadReport bind(std::optional<NamingConvention> force = {}) {
    Result<Binding> binding = HeaderList(list_).bind(config_, force);
    EXPECT_TRUE(binding.ok()) << binding.status().to_string();
    return binding.ok() ? binding->report : LoadReport{};
  }
  NamedShape& find(const std::string& name) {
    auto it = std::find_if(list_.begin(), list_.end(),
                           [&](const NamedShape& t) { return t.name == name; });
    EXPECT_NE(it, list_.end()) << name;
    return *it;
  }
  void erase(const std::string& name) {
    list_.erase(std::find_if(list_.begin(), list_.end(),
                             [&](const NamedShape& t) { return t.name == name; }));
  }
  ModelConfig config_ = testing::tiny_config();
  std::vector<NamedShape> list_ = testing::official_inventory(config_);
};

TEST_F(BadInputTest, TheReleaseLayoutIsClean) {
  const LoadReport report = bind();
  EXPECT_TRUE(report.problems.empty()) << testing::joined(report.problems);
  EXPECT_EQ(report.official_count_expected, report.official_count_found);
}

TEST_F(BadInputTest, WrongShapeNamesSlotExpectationAndKey) {
  find("layers.1.attn.wq_a.weight").shape = {64, 32};
  const LoadReport report = bind();
  ASSERT_EQ(report.problems.size(), 1u) << testing::joined(report.problems);
  EXPECT_EQ(report.problems[0],
            "layer 1 attn.wq_a: expected bf16 [32, 64], got f8_e4m3 [64, 32] "
            "(key layers.1.attn.wq_a.weight in model-00001.safetensors)");
}

TEST_F(BadInputTest, WrongDtypeNamesSlotExpectationAndKey) {
  find("layers.0.hc_attn_fn").dtype = DType::kI32;
  const LoadReport report = bind();
  ASSERT_EQ(report.problems.size(), 1u) << testing::joined(report.problems);
  EXPECT_EQ(report.problems[0],
            "layer 0 hc_attn.fn: expected f32 [8, 128], got i32 [8, 128] "
            "(key layers.0.hc_attn_fn in model-00001.safetensors)");
}

TEST_F(BadInputTest, MissingTensorIsAnUnboundSlot) {
  erase("layers.2.attn.compressor.ape");
  const LoadReport report = bind();
  EXPECT_EQ(report.unbound_slots, std::vector<std::string>{"layer 2 attn.compressor.ape"});
  EXPECT_TRUE(has(report.problems,
                  "layer 2 attn.compressor.ape: missing (expected key "
                  "layers.2.attn.compressor.ape)"));
}

TEST_F(BadInputTest, MissingExpertNamesTheKey) {
  erase("layers.0.ffn.experts.3.w3.weight");
  const LoadReport report = bind();
  EXPECT_TRUE(
      has(report.problems, "layer 0 ffn.experts.w13: missing key layers.0.ffn.experts.3.w3.weight"))
      << testing::joined(report.problems);
}

TEST_F(BadInputTest, ScaleWithoutWeightIsMissingWeight) {
  erase("layers.1.attn.wkv.weight");
  const LoadReport report = bind();
  EXPECT_TRUE(has(report.problems, "layer 1 attn.wkv: missing key layers.1.attn.wkv.weight"))
      << testing::joined(report.problems);
}

TEST_F(BadInputTest, UnexpectedTensorIsAnUnboundKey) {
  // A compressor on the sliding layer 0: a real name pattern, but not of this config.
  list_.push_back({"layers.0.attn.compressor.ape", DType::kF32, {4, 64}});
  list_.push_back({"layers.1.attn.wq_a.bias", DType::kBF16, {32}});
  const LoadReport report = bind();
  EXPECT_EQ(report.unbound_keys,
            (std::vector<std::string>{"layers.0.attn.compressor.ape", "layers.1.attn.wq_a.bias"}));
  EXPECT_TRUE(has(report.problems,
                  "unexpected tensor layers.0.attn.compressor.ape (in model-00001.safetensors)"));
}

TEST_F(BadInputTest, LayerBeyondTheMtpBlockIsUnexpected) {
  list_.push_back({"layers.3.attn_norm.weight", DType::kBF16, {64}});  // MTP numbered as layer 3
  list_.push_back({"layers.4.attn_norm.weight", DType::kBF16, {64}});  // nothing
  const LoadReport report = bind();
  EXPECT_EQ(report.unbound_keys, std::vector<std::string>{"layers.4.attn_norm.weight"});
  EXPECT_TRUE(has({report.ignored.back().reason}, "numbered as layer 3"));
}

// ---- MTP blocks: all or nothing, official inner names in every convention ----

TEST_F(BadInputTest, WithoutMtpTensorsTheModelBindsWithoutSpeculation) {
  list_ = testing::official_inventory(config_, {LinearForm::kFp8E8m0, ExpertForm::kMxfp4, false});
  const LoadReport report = bind();
  EXPECT_TRUE(report.problems.empty()) << testing::joined(report.problems);
  EXPECT_EQ(report.n_mtp_blocks, 0u);
  EXPECT_EQ(report.n_mtp_bound, 0u);
}

TEST_F(BadInputTest, APartialMtpBlockIsAProblemNamingTheMissingKey) {
  erase("mtp.0.h_proj.weight");
  erase("mtp.0.h_proj.scale");
  erase("mtp.0.attn.wkv.scale");
  const LoadReport report = bind();
  EXPECT_TRUE(has(report.problems, "layer 3 h_proj: missing (expected key mtp.0.h_proj.weight)"))
      << testing::joined(report.problems);
  EXPECT_TRUE(has(report.problems, "layer 3 attn.wkv: fp8 block scale"))
      << testing::joined(report.problems);
}

TEST_F(BadInputTest, AWrongMtpShapeNamesItsKey) {
  find("mtp.0.enorm.weight").shape = {32};
  const LoadReport report = bind();
  ASSERT_EQ(report.problems.size(), 1u) << testing::joined(report.problems);
  EXPECT_TRUE(has(report.problems, "expected bf16 [64], got bf16 [32] (key mtp.0.enorm.weight"))
      << report.problems[0];
}

TEST_F(BadInputTest, MtpBlocksBeyondTheConfigsAreUnexpected) {
  list_.push_back({"mtp.1.enorm.weight", DType::kBF16, {64}});
  EXPECT_EQ(bind().unbound_keys, std::vector<std::string>{"mtp.1.enorm.weight"});
}

TEST(BindTest, MtpTensorsBesideATransformersSavedModelBind) {
  for (const char* name : {"tiny_a_pretrained", "tiny_a_state_dict"}) {
    const std::string dir = dsv4::testing::source_path(std::string("tests/golden/") + name);
    const ModelConfig config =
        testing::parsed_config(testing::read_text(dir + "/model/config.json"), name);
    std::vector<NamedShape> list = testing::golden_keys(dir + "/keys.txt");
    size_t n_mtp = 0;
    for (const NamedShape& t : testing::official_inventory(config)) {
      if (!t.name.starts_with("mtp.")) continue;
      list.push_back(t);
      ++n_mtp;
    }
    Result<Binding> binding = HeaderList(list).bind(config);
    ASSERT_TRUE(binding.ok()) << binding.status().to_string();
    EXPECT_NE(binding->report.convention, NamingConvention::kOfficial) << name;
    EXPECT_TRUE(binding->report.problems.empty())
        << name << testing::joined(binding->report.problems);
    EXPECT_EQ(binding->report.n_mtp_blocks, 1u) << name;
    EXPECT_EQ(binding->report.n_mtp_bound, n_mtp) << name;
  }
}

TEST_F(BadInputTest, Fp8WeightWithoutScale) {
  erase("layers.0.attn.wo_b.scale");
  const LoadReport report = bind();
  EXPECT_TRUE(has(report.problems,
                  "layer 0 attn.wo_b: fp8 block scale f8_e8m0 or f32 [1, 1] is missing "
                  "for layers.0.attn.wo_b.weight"))
      << testing::joined(report.problems);
}

TEST_F(BadInputTest, ScaleOnADenseWeightIsRefused) {
  list_.push_back({"layers.0.attn.q_norm.scale", DType::kF8E8M0, {1}});
  const LoadReport report = bind();
  EXPECT_TRUE(
      has(report.problems, "layers.0.attn.q_norm.scale (in model-00001.safetensors) is a scale"))
      << testing::joined(report.problems);
}

TEST_F(BadInputTest, TwoBlockScalesForOneWeight) {
  list_.push_back({"layers.0.attn.wq_a.weight_scale_inv", DType::kF8E8M0, {1, 1}});
  const LoadReport report = bind();
  EXPECT_TRUE(has(report.problems,
                  "two tensors for one role: layers.0.attn.wq_a.scale and "
                  "layers.0.attn.wq_a.weight_scale_inv"))
      << testing::joined(report.problems);
}

// Some MXFP4 -> NVFP4 converters keep the old `.scale` name for the new e4m3 block scale (§3.3):
// the form is read from dtypes, not names.
TEST_F(BadInputTest, Nvfp4ScaleUnderTheOldScaleNameIsRecognisedByDtype) {
  list_ = testing::official_inventory(config_, {LinearForm::kFp8E8m0, ExpertForm::kNvfp4, true});
  for (NamedShape& t : list_) {
    if (t.name.ends_with(".weight_scale")) t.name.replace(t.name.size() - 13, 13, ".scale");
  }
  const LoadReport report = bind();
  EXPECT_TRUE(report.problems.empty()) << testing::joined(report.problems);
  EXPECT_EQ(report.storage_census.at(std::string(storage_form_name(StorageForm::kNvfp4))),
            static_cast<size_t>(config_.n_layer * config_.n_routed_experts * 3));
}

TEST_F(BadInputTest, Nvfp4WithoutGlobalScale) {
  list_ = testing::official_inventory(config_, {LinearForm::kFp8E8m0, ExpertForm::kNvfp4, true});
  erase("layers.2.ffn.experts.1.w2.weight_scale_2");
  const LoadReport report = bind();
  ASSERT_EQ(report.problems.size(), 1u) << testing::joined(report.problems);
  EXPECT_EQ(
      report.problems[0],
      "layer 2 ffn.experts.w2 expert 1: nvfp4 global scale (weight_scale_2) f32 [1] is missing "
      "for layers.2.ffn.experts.1.w2.weight (in model-00001.safetensors)");
}

// Nothing but the MTP block, whose names are the official ones in every convention.
TEST_F(BadInputTest, ForcedWrongConventionBindsNothingOfTheMainModel) {
  const LoadReport report = bind(NamingConvention::kStateDict);
  EXPECT_EQ(report.convention, NamingConvention::kStateDict);
  EXPECT_GT(report.n_mtp_bound, 0u);
  EXPECT_EQ(report.n_bound, report.n_mtp_bound);
  EXPECT_FALSE(report.unbound_slots.empty());
}

TEST_F(BadInputTest, NoConventionMatchesIsAnError) {
  list_ = {{"encoder.layer.0.weight", DType::kBF16, {4, 4}}};
  Result<Binding> binding = HeaderList(list_).bind(config_);
  ASSERT_FALSE(binding.ok());
  EXPECT_NE(binding.status().message().find("first key: encoder.layer.0.weight"),
            std::string::npos);
}

// ---- state_dict alternatives: exactly one form ----

std::vector<NamedShape> golden_state_dict() {
  return testing::golden_keys(
      dsv4::testing::source_path("tests/golden/tiny_a_state_dict/keys.txt"));
}

ModelConfig golden_config(const char* name) {
  const std::string dir = dsv4::testing::source_path(std::string("tests/golden/") + name);
  return testing::parsed_config(testing::read_text(dir + "/model/config.json"), name);
}

TEST(AlternativeFormsTest, FusedAndPerExpertExpertsTogetherAreBoundTwice) {
  std::vector<NamedShape> list = golden_state_dict();
  list.push_back({"model.layers.0.mlp.experts.0.gate_proj.weight", DType::kBF16, {64, 128}});
  Result<Binding> binding = HeaderList(list).bind(golden_config("tiny_a_state_dict"));
  ASSERT_TRUE(binding.ok());
  const std::vector<std::string>& problems = binding->report.problems;
  ASSERT_EQ(problems.size(), 1u) << testing::joined(problems);
  EXPECT_EQ(problems[0],
            "layer 0 ffn.experts.w13: bound twice, by model.layers.0.mlp.experts.gate_up_proj and "
            "by model.layers.0.mlp.experts.0.gate_proj.weight (exactly one form may be present)");
}

TEST(AlternativeFormsTest, OldAndNewIndexerWeightsProjTogetherAreBoundTwice) {
  std::vector<NamedShape> list = golden_state_dict();
  list.push_back(
      {"model.layers.2.self_attn.compressor.indexer.weights_proj.weight", DType::kBF16, {4, 128}});
  Result<Binding> binding = HeaderList(list).bind(golden_config("tiny_a_state_dict"));
  ASSERT_TRUE(binding.ok());
  EXPECT_TRUE(has(binding->report.problems, "layer 2 attn.indexer.weights_proj: bound twice"))
      << testing::joined(binding->report.problems);
}

TEST(AlternativeFormsTest, OldIndexerWeightsProjNameAloneBinds) {
  std::vector<NamedShape> list = golden_state_dict();
  for (NamedShape& t : list) {
    if (t.name == "model.layers.2.self_attn.compressor.indexer.scorer.weights_proj.weight") {
      t.name = "model.layers.2.self_attn.compressor.indexer.weights_proj.weight";
    }
  }
  Result<Binding> binding = HeaderList(list).bind(golden_config("tiny_a_state_dict"));
  ASSERT_TRUE(binding.ok());
  EXPECT_TRUE(binding->report.problems.empty()) << testing::joined(binding->report.problems);
}

// The exact message the issue asks for (tiny_a: D = 128, Q = 64, layer 3 exists).
TEST(AlternativeFormsTest, IssueExampleMessage) {
  std::vector<NamedShape> list =
      testing::golden_keys(dsv4::testing::source_path("tests/golden/tiny_a_pretrained/keys.txt"));
  for (NamedShape& t : list) {
    if (t.name == "model.layers.3.attn.wq_a.weight") t = {t.name, DType::kF8E4M3, {128, 64}};
  }
  Result<Binding> binding = HeaderList(list).bind(golden_config("tiny_a_pretrained"));
  ASSERT_TRUE(binding.ok());
  ASSERT_EQ(binding->report.problems.size(), 1u);
  EXPECT_EQ(binding->report.problems[0],
            "layer 3 attn.wq_a: expected bf16 [64, 128], got f8_e4m3 [128, 64] "
            "(key model.layers.3.attn.wq_a.weight in model-00001.safetensors)");
}

}  // namespace
}  // namespace dsv4::checkpoint

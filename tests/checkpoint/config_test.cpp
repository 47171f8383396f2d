// ModelConfig from config.json: the real V4-Flash and V4-Pro configs (official style), the same
// Flash written by transformers, the golden tiny configs before and after transformers saved
// them, transformers' defaults, and one refusal per validation rule, each naming its field.
#include "checkpoint/config.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "format/json.h"
#include "testing/source_dir.h"
#include "testing/temp_dir.h"
#include "testing/tiny_checkpoint.h"

namespace dsv4::checkpoint {
namespace {

using format::Json;
using testing::source_path;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

ModelConfig parse_ok(const std::string& text, const std::string& path) {
  Result<ModelConfig> config = parse_model_config(text, path);
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  return config.ok() ? *config : ModelConfig{};
}

ModelConfig fixture(const std::string& name) {
  const std::string path = source_path("tests/checkpoint/fixtures/" + name);
  return parse_ok(read_file(path), path);
}

void expect_rope(const RopeConfig& a, const RopeConfig& b) {
  EXPECT_EQ(a.theta, b.theta);
  EXPECT_EQ(a.yarn, b.yarn);
  EXPECT_EQ(a.factor, b.factor);
  EXPECT_EQ(a.original_max_position, b.original_max_position);
  EXPECT_EQ(a.beta_fast, b.beta_fast);
  EXPECT_EQ(a.beta_slow, b.beta_slow);
}

// Everything but compress_ratios, which only the official style carries.
void expect_same_model(const ModelConfig& a, const ModelConfig& b) {
  const std::vector<std::pair<int64_t, int64_t>> ints = {
      {a.vocab_size, b.vocab_size},
      {a.hidden_size, b.hidden_size},
      {a.n_layer, b.n_layer},
      {a.n_head, b.n_head},
      {a.head_dim, b.head_dim},
      {a.rope_head_dim, b.rope_head_dim},
      {a.q_lora_rank, b.q_lora_rank},
      {a.o_groups, b.o_groups},
      {a.o_lora_rank, b.o_lora_rank},
      {a.sliding_window, b.sliding_window},
      {a.max_position_embeddings, b.max_position_embeddings},
      {a.n_routed_experts, b.n_routed_experts},
      {a.n_shared_experts, b.n_shared_experts},
      {a.n_expert_used, b.n_expert_used},
      {a.moe_intermediate_size, b.moe_intermediate_size},
      {a.hc_mult, b.hc_mult},
      {a.hc_sinkhorn_iters, b.hc_sinkhorn_iters},
      {a.index_n_heads, b.index_n_heads},
      {a.index_head_dim, b.index_head_dim},
      {a.index_topk, b.index_topk},
      {a.n_mtp_layers, b.n_mtp_layers},
      {a.bos_token_id, b.bos_token_id},
      {a.eos_token_id, b.eos_token_id}};
  for (size_t i = 0; i < ints.size(); ++i)
    EXPECT_EQ(ints[i].first, ints[i].second) << "int field " << i;
  EXPECT_EQ(a.routed_scaling_factor, b.routed_scaling_factor);
  EXPECT_EQ(a.swiglu_limit, b.swiglu_limit);
  EXPECT_EQ(a.norm_topk_prob, b.norm_topk_prob);
  EXPECT_EQ(a.hc_eps, b.hc_eps);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  expect_rope(a.rope_sliding, b.rope_sliding);
  expect_rope(a.rope_compressed, b.rope_compressed);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    EXPECT_EQ(a.layers[i].attention, b.layers[i].attention) << "layer " << i;
    EXPECT_EQ(a.layers[i].compress_ratio, b.layers[i].compress_ratio) << "layer " << i;
    EXPECT_EQ(a.layers[i].routing, b.layers[i].routing) << "layer " << i;
  }
}

int count(const ModelConfig& c, AttentionType type) {
  int n = 0;
  for (const LayerSchedule& layer : c.layers) n += layer.attention == type;
  return n;
}

TEST(ConfigTest, ReadsTheOfficialFlashConfig) {
  const ModelConfig c = fixture("v4_flash_config.json");
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.n_layer, 43);
  EXPECT_EQ(c.n_head, 64);
  EXPECT_EQ(c.head_dim, 512);
  EXPECT_EQ(c.rope_head_dim, 64);
  EXPECT_EQ(c.q_lora_rank, 1024);
  EXPECT_EQ(c.o_groups, 8);
  EXPECT_EQ(c.n_routed_experts, 256);
  EXPECT_EQ(c.n_expert_used, 6);
  EXPECT_EQ(c.moe_intermediate_size, 2048);
  EXPECT_EQ(c.routed_scaling_factor, 1.5);
  EXPECT_EQ(c.index_topk, 512);
  EXPECT_EQ(c.n_mtp_layers, 1);
  EXPECT_EQ(c.compress_ratios.size(), 44u);
  EXPECT_EQ(c.compress_ratios.back(), 0);  // the MTP layer is sliding-window
  ASSERT_EQ(c.mtp_layers.size(), 1u);
  EXPECT_EQ(c.schedule(43).attention, AttentionType::kSliding);
  EXPECT_EQ(c.schedule(43).compress_ratio, 0);
  EXPECT_EQ(c.schedule(43).routing, RoutingType::kScore);
  // §1.3: L0, L1 sliding; L2..L41 CSA (even) / HCA (odd); L42 CSA; hash routing in L0..L2.
  EXPECT_EQ(c.layers[0].attention, AttentionType::kSliding);
  EXPECT_EQ(c.layers[1].compress_ratio, 0);
  EXPECT_EQ(c.layers[2].attention, AttentionType::kCompressedSparse);
  EXPECT_EQ(c.layers[2].compress_ratio, 4);
  EXPECT_EQ(c.layers[3].attention, AttentionType::kHeavilyCompressed);
  EXPECT_EQ(c.layers[3].compress_ratio, 128);
  EXPECT_EQ(c.layers[42].attention, AttentionType::kCompressedSparse);
  EXPECT_EQ(count(c, AttentionType::kCompressedSparse), 21);
  EXPECT_EQ(count(c, AttentionType::kHeavilyCompressed), 20);
  EXPECT_EQ(c.layers[2].routing, RoutingType::kHash);
  EXPECT_EQ(c.layers[3].routing, RoutingType::kScore);
  // YaRN only on the compressed layers (§2.4.2).
  EXPECT_EQ(c.rope_sliding.theta, 10000.0);
  EXPECT_FALSE(c.rope_sliding.yarn);
  EXPECT_EQ(c.rope_compressed.theta, 160000.0);
  EXPECT_TRUE(c.rope_compressed.yarn);
  EXPECT_EQ(c.rope_compressed.factor, 16.0);
  EXPECT_EQ(c.rope_compressed.original_max_position, 65536);
  EXPECT_EQ(c.rope_compressed.beta_fast, 32.0);
  EXPECT_EQ(c.rope_compressed.beta_slow, 1.0);
}

TEST(ConfigTest, ReadsTheOfficialProConfig) {
  const ModelConfig c = fixture("v4_pro_config.json");
  EXPECT_EQ(c.hidden_size, 7168);
  EXPECT_EQ(c.n_layer, 61);
  EXPECT_EQ(c.n_head, 128);
  EXPECT_EQ(c.o_groups, 16);
  EXPECT_EQ(c.q_lora_rank, 1536);
  EXPECT_EQ(c.n_routed_experts, 384);
  EXPECT_EQ(c.index_topk, 1024);
  EXPECT_EQ(c.routed_scaling_factor, 2.5);
  EXPECT_EQ(c.compress_ratios.size(), 62u);
  EXPECT_EQ(c.layers[0].attention, AttentionType::kHeavilyCompressed);
  EXPECT_EQ(c.layers[1].compress_ratio, 128);
  EXPECT_EQ(c.layers[60].attention, AttentionType::kCompressedSparse);
  EXPECT_EQ(count(c, AttentionType::kCompressedSparse), 30);
  EXPECT_EQ(count(c, AttentionType::kHeavilyCompressed), 31);
}

TEST(ConfigTest, TransformersStyleFlashMeansTheSame) {
  expect_same_model(fixture("v4_flash_transformers_config.json"), fixture("v4_flash_config.json"));
}

// Each golden config as given to the oracle (flat rope_parameters) and as transformers saved it
// next to the checkpoint (nested main/compress) resolves to one model.
TEST(ConfigTest, GoldenConfigsMeanTheSameBeforeAndAfterTransformers) {
  const std::filesystem::path golden = source_path("tests/golden");
  int n_compared = 0;
  for (const auto& dir : std::filesystem::directory_iterator(golden)) {
    const std::filesystem::path saved = dir.path() / "model" / "config.json";
    if (!std::filesystem::exists(saved)) continue;
    std::string name = dir.path().filename().string();  // tiny_a_pretrained, brown_small
    SCOPED_TRACE(name);
    for (const char* layout : {"_pretrained", "_state_dict"}) {
      if (name.ends_with(layout)) name.resize(name.size() - std::strlen(layout));
    }
    const std::string input = (golden / "configs" / (name + ".json")).string();
    const ModelConfig before = parse_ok(read_file(input), input);
    const ModelConfig after = parse_ok(read_file(saved.string()), saved.string());
    expect_same_model(before, after);
    ++n_compared;
  }
  EXPECT_GE(n_compared, 7);
}

TEST(ConfigTest, GoldenTinyAResolvesAsTransformersDoes) {
  const std::string path = source_path("tests/golden/configs/tiny_a.json");
  const ModelConfig c = parse_ok(read_file(path), path);
  EXPECT_EQ(c.rope_head_dim, 16);  // qk_rope_head_dim
  ASSERT_EQ(c.layers.size(), 5u);
  EXPECT_EQ(c.layers[1].attention, AttentionType::kSliding);
  EXPECT_EQ(c.layers[3].attention, AttentionType::kHeavilyCompressed);
  EXPECT_EQ(c.layers[3].compress_ratio, 16);
  EXPECT_EQ(c.layers[4].compress_ratio, 4);
  EXPECT_EQ(c.layers[1].routing, RoutingType::kHash);
  EXPECT_EQ(c.layers[2].routing, RoutingType::kScore);
  EXPECT_EQ(c.rope_compressed.theta, 160000.0);
  EXPECT_EQ(c.rope_compressed.original_max_position, 256);
  EXPECT_TRUE(c.compress_ratios.empty());
}

// An empty object is transformers' default DeepseekV4Config: Flash sizes, the V4-Pro schedule
// (two HCA layers, then HCA/CSA alternating), three hash layers, no YaRN without rope params.
TEST(ConfigTest, AbsentKeysTakeTransformersDefaults) {
  const ModelConfig c = parse_ok("{}", "config.json");
  EXPECT_EQ(c.hidden_size, 4096);
  EXPECT_EQ(c.n_layer, 43);
  EXPECT_EQ(c.rope_head_dim, 64);
  EXPECT_EQ(c.swiglu_limit, 10.0);
  EXPECT_EQ(c.eos_token_id, 1);
  EXPECT_EQ(c.n_mtp_layers, 1);
  EXPECT_EQ(c.layers[0].attention, AttentionType::kHeavilyCompressed);
  EXPECT_EQ(c.layers[2].attention, AttentionType::kHeavilyCompressed);
  EXPECT_EQ(c.layers[3].attention, AttentionType::kCompressedSparse);
  EXPECT_EQ(c.layers[3].compress_ratio, 4);
  EXPECT_EQ(c.layers[2].compress_ratio, 128);
  EXPECT_EQ(c.layers[2].routing, RoutingType::kHash);
  EXPECT_EQ(c.layers[3].routing, RoutingType::kScore);
  EXPECT_FALSE(c.rope_compressed.yarn);
  EXPECT_EQ(c.rope_compressed.theta, 160000.0);
}

// quantization_config declares the release's FP8 linears only as DeepSeek writes it (fp8 with
// power-of-two scales); any other section, or one of another shape, declares nothing and is no
// error (it only informs a memory plan).
TEST(ConfigTest, ReadsWhetherTheLinearsAreTheReleasesFp8) {
  EXPECT_TRUE(fixture("v4_flash_config.json").fp8_linears);
  EXPECT_TRUE(fixture("v4_pro_config.json").fp8_linears);
  EXPECT_FALSE(parse_ok("{}", "config.json").fp8_linears);
  for (const char* section : {R"({"quant_method": "fp8", "fmt": "e4m3"})",
                              R"({"quant_method": "fp8", "scale_fmt": "float32"})",
                              R"({"quant_method": "modelopt", "scale_fmt": "ue8m0"})",
                              R"({"quant_method": 8})", R"("fp8")", "[]", "null"}) {
    SCOPED_TRACE(section);
    EXPECT_FALSE(parse_ok(std::string(R"({"quantization_config": )") + section + "}", "config.json")
                     .fp8_linears);
  }
  EXPECT_TRUE(parse_ok(R"({"quantization_config": {"quant_method": "fp8", "scale_fmt": "ue8m0"}})",
                       "config.json")
                  .fp8_linears);
}

TEST(ConfigTest, RopeScalingWinsOverRopeParameters) {
  const ModelConfig c = parse_ok(
      R"({"rope_scaling": {"type": "yarn", "factor": 4, "original_max_position_embeddings": 512},
          "rope_parameters": {"rope_type": "yarn", "factor": 8, "original_max_position_embeddings": 64}})",
      "config.json");
  EXPECT_EQ(c.rope_compressed.factor, 4.0);
  EXPECT_EQ(c.rope_compressed.original_max_position, 512);
}

TEST(ConfigTest, LoadsFromADirectory) {
  testing::TempDir dir;
  ASSERT_TRUE(
      testing::write_text(dir.file("config.json"),
                          read_file(source_path("tests/checkpoint/fixtures/v4_flash_config.json")))
          .ok());
  Result<ModelConfig> c = load_model_config(dir.path());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->n_layer, 43);
  Result<ModelConfig> missing = load_model_config(dir.file("nowhere"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nowhere/config.json"), std::string::npos);
}

struct BadConfig {
  const char* label;
  Json patch;  // merged into the official Flash config (null erases a key)
  std::string expected;
};

std::vector<BadConfig> bad_configs() {
  Json short_ratios = Json::array();
  for (int i = 0; i < 43; ++i) short_ratios.push_back(0);
  Json ratio_one = Json::parse(
      read_file(source_path("tests/checkpoint/fixtures/v4_flash_config.json")))["compress_ratios"];
  ratio_one[5] = 1;
  return {
      {"o_groups",
       {{"num_attention_heads", 12}},
       "config.json: num_attention_heads (12) is not divisible by o_groups (8)"},
      {"zero dim", {{"hidden_size", 0}}, "hidden_size (0) must be positive"},
      {"negative dim",
       {{"moe_intermediate_size", -2}},
       "moe_intermediate_size (-2) must be positive"},
      {"not an integer", {{"vocab_size", "big"}}, "vocab_size must be an integer"},
      {"fraction", {{"hidden_size", 4096.5}}, "hidden_size must be an integer"},
      {"not a bool", {{"tie_word_embeddings", "no"}}, "tie_word_embeddings must be true or false"},
      {"rope dim too big",
       {{"head_dim", 64}},
       "head_dim (64) must be larger than qk_rope_head_dim (64)"},
      {"odd rope dim", {{"qk_rope_head_dim", 63}}, "qk_rope_head_dim (63) must be even"},
      {"rope factor not whole",
       {{"qk_rope_head_dim", nullptr}, {"partial_rotary_factor", 0.3}},
       "partial_rotary_factor (0.300000) times head_dim (512) is not a whole number"},
      {"rope dims disagree", {{"partial_rotary_factor", 0.25}}, "qk_rope_head_dim (64) disagrees"},
      {"top-k",
       {{"num_experts_per_tok", 300}},
       "num_experts_per_tok (300) is more than n_routed_experts (256)"},
      {"shared experts", {{"n_shared_experts", 2}}, "n_shared_experts (2) must be 1"},
      {"scoring", {{"scoring_func", "softmax"}}, "scoring_func 'softmax' is not supported"},
      {"activation", {{"hidden_act", "gelu"}}, "hidden_act 'gelu' is not supported"},
      {"model type", {{"model_type", "deepseek_v3"}}, "model_type 'deepseek_v3'"},
      {"kv heads", {{"num_key_value_heads", 8}}, "num_key_value_heads (8) is not supported"},
      {"bias", {{"attention_bias", true}}, "attention_bias true is not supported"},
      {"index head dim",
       {{"index_head_dim", 32}},
       "index_head_dim (32) is smaller than qk_rope_head_dim (64)"},
      {"eos", {{"eos_token_id", 200000}}, "eos_token_id (200000) is outside the vocabulary"},
      {"layers", {{"num_hidden_layers", 5000}}, "num_hidden_layers (5000) is over 1024"},
      {"huge dim",
       {{"hidden_size", int64_t{1} << 40}},
       "hidden_size (1099511627776) is over 65536, the most this engine supports"},
      {"huge expert count",
       {{"n_routed_experts", 2147483647}},
       "n_routed_experts (2147483647) is over 4096"},
      {"mtp layers", {{"num_nextn_predict_layers", 5000}}, "num_nextn_predict_layers (5000)"},
      // n_layer + n_mtp_layers, the compress_ratios count, would overflow int64.
      {"mtp layers past int64",
       {{"num_nextn_predict_layers", std::numeric_limits<int64_t>::max()}},
       "num_nextn_predict_layers (9223372036854775807) must be in [0, 1024]"},
      {"hc_eps", {{"hc_eps", 0}}, "hc_eps (0.000000) must be in (0, 1)"},
      {"scaling",
       {{"routed_scaling_factor", -1}},
       "routed_scaling_factor (-1.000000) must be positive"},
      {"ratio count",
       {{"compress_ratios", short_ratios}},
       "compress_ratios has 43 entries; expected num_hidden_layers (43) + num_nextn_predict_layers "
       "(1) = 44"},
      {"ratio 1", {{"compress_ratios", ratio_one}}, "layer 5: compress ratio 1 does not fit"},
      {"layer type",
       {{"layer_types", Json(43, "full_attention")}},
       "layer_types[0] 'full_attention' is not"},
      {"layer types short",
       {{"layer_types", {"sliding_attention"}}},
       "layer_types has 1 entries, fewer than num_hidden_layers (43)"},
      {"types vs ratios",
       {{"layer_types", Json(43, "sliding_attention")}},
       "compress_ratios[2] (4) disagrees with layer_types[2] (sliding_attention, ratio 0)"},
      {"mlp type",
       {{"mlp_layer_types", Json(43, "dense")}},
       "mlp_layer_types[0] 'dense' is not supported"},
      {"rates",
       {{"compress_rates", {{"full_attention", 4}}}},
       "compress_rates.full_attention is not"},
      {"rope type",
       {{"rope_scaling", {{"type", "llama3"}, {"factor", 8}}}},
       "rope_scaling.rope_type 'llama3' is not supported"},
      {"rope key",
       {{"rope_scaling", {{"type", "yarn"}, {"factor", 8}, {"mscale", 1}}}},
       "rope_scaling.mscale is not supported"},
      {"yarn factor",
       {{"rope_scaling", {{"type", "yarn"}, {"factor", 0.5}}}},
       "factor (0.500000) must be >= 1"},
      {"attention factor",
       {{"rope_scaling", {{"type", "yarn"}, {"factor", 8}, {"attention_factor", 1.2}}}},
       "rope_scaling.attention_factor other than 1.0 is not supported"},
      {"rope theta", {{"rope_theta", -1}}, "rope (sliding layers) rope_theta must be positive"},
      {"nested yarn without attention factor",
       {{"rope_scaling", nullptr},
        {"rope_parameters",
         {{"main", {{"rope_type", "default"}, {"rope_theta", 10000}}},
          {"compress", {{"rope_type", "yarn"}, {"rope_theta", 160000}, {"factor", 16}}}}}},
       "rope_parameters.compress.attention_factor is absent"},
  };
}

TEST(ConfigTest, RefusesEachInvalidFieldByName) {
  const Json flash =
      Json::parse(read_file(source_path("tests/checkpoint/fixtures/v4_flash_config.json")));
  for (const BadConfig& bad : bad_configs()) {
    SCOPED_TRACE(bad.label);
    Json config = flash;
    config.merge_patch(bad.patch);
    Result<ModelConfig> parsed = parse_model_config(config.dump(), "config.json");
    ASSERT_FALSE(parsed.ok());
    EXPECT_NE(parsed.status().message().find(bad.expected), std::string::npos)
        << "expected '" << bad.expected << "' in: " << parsed.status().message();
    EXPECT_EQ(parsed.status().message().rfind("config.json: ", 0), 0u) << parsed.status().message();
  }
}

TEST(ConfigTest, UnsupportedValuesAreUnimplementedNotInvalid) {
  Result<ModelConfig> parsed = parse_model_config(R"({"scoring_func": "sigmoid"})", "config.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kUnimplemented);
}

TEST(ConfigTest, RefusesMalformedJson) {
  for (const char* text : {"{", "[]", R"({"hidden_size": 1, "hidden_size": 2})"}) {
    SCOPED_TRACE(text);
    Result<ModelConfig> parsed = parse_model_config(text, "dir/config.json");
    ASSERT_FALSE(parsed.ok());
    EXPECT_NE(parsed.status().message().find("dir/config.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace dsv4::checkpoint

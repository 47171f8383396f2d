// bench's synthetic checkpoints (bench/checkpoint/synthetic_checkpoint.h) on two tiny configs,
// one per config.json style: transformers' (tiny_a: layer_types, mlp_layer_types) and the
// official one (V4-Flash's own config, its dimensions shrunk: compress_ratios with the MTP entry,
// num_hash_layers, an FP8 quantization_config). A written checkpoint must bind exactly as
// `dsv4 check` demands (every expected key once, nothing unknown, no all-zero or non-finite
// tensor), keep the original's first layers, hold NVFP4 experts, and run a finite forward;
// a non-empty output directory is refused untouched; a seed writes the same bytes every time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/loader.h"
#include "checkpoint/synthetic_checkpoint.h"
#include "format/json.h"
#include "format/text_file.h"
#include "model/mtp.h"
#include "model/nvfp4_golden.h"
#include "testing/source_dir.h"
#include "testing/temp_dir.h"

namespace dsv4::bench {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kLayers = 4;  // of 5 (tiny_a) and 43 (V4-Flash): sliding, CSA, HCA, both routings

std::string tiny_a_config() { return testing::source_path("tests/golden/configs/tiny_a.json"); }

// V4-Flash's official config.json with tiny dimensions, written into `dir`.
std::string tiny_flash_config(const testing::TempDir& dir) {
  const std::string fixture =
      testing::source_path("tests/checkpoint/fixtures/v4_flash_config.json");
  Result<std::string> text = format::read_text_file(fixture);
  EXPECT_TRUE(text.ok()) << text.status().to_string();
  Result<format::Json> config = format::parse_json(text.ok() ? *text : "{}", fixture);
  EXPECT_TRUE(config.ok());
  const format::Json tiny = {{"vocab_size", 256},
                             {"hidden_size", 128},
                             {"num_attention_heads", 4},
                             {"head_dim", 64},
                             {"qk_rope_head_dim", 16},
                             {"q_lora_rank", 64},
                             {"o_groups", 2},
                             {"o_lora_rank", 32},
                             {"n_routed_experts", 8},
                             {"num_experts_per_tok", 2},
                             {"moe_intermediate_size", 64},
                             {"index_n_heads", 4},
                             {"index_head_dim", 32},
                             {"index_topk", 8},
                             {"sliding_window", 16}};
  config->update(tiny);
  const std::string path = dir.file("tiny_flash_config.json");
  EXPECT_TRUE(format::write_text_file(path, config->dump(2)).ok());
  return path;
}

Result<SyntheticSummary> synthesize(const std::string& config, const std::string& out_dir,
                                    int64_t n_layers = kLayers, uint64_t seed = 1,
                                    int64_t n_mtp_layers = 0, bool fp8_linears = false) {
  SyntheticOptions options;
  options.config_path = config;
  options.out_dir = out_dir;
  options.n_layers = n_layers;
  options.n_mtp_layers = n_mtp_layers;
  options.seed = seed;
  options.fp8_linears = fp8_linears;
  return write_synthetic_checkpoint(options);
}

// The written config keeps the original's first layers and drops the MTP layers.
void expect_first_layers_of(const std::string& original_path, const std::string& out_dir) {
  Result<std::string> text = format::read_text_file(original_path);
  ASSERT_TRUE(text.ok());
  Result<checkpoint::ModelConfig> original = checkpoint::parse_model_config(*text, original_path);
  Result<checkpoint::ModelConfig> written = checkpoint::load_model_config(out_dir);
  ASSERT_TRUE(original.ok() && written.ok()) << written.status().to_string();
  ASSERT_EQ(written->n_layer, kLayers);
  EXPECT_EQ(written->n_mtp_layers, 0);
  for (int64_t i = 0; i < kLayers; ++i) {
    const checkpoint::LayerSchedule& want = original->layers[static_cast<size_t>(i)];
    const checkpoint::LayerSchedule& got = written->layers[static_cast<size_t>(i)];
    EXPECT_EQ(got.attention, want.attention) << "layer " << i;
    EXPECT_EQ(got.compress_ratio, want.compress_ratio) << "layer " << i;
    EXPECT_EQ(got.routing, want.routing) << "layer " << i;
  }
  Result<std::string> config_text = format::read_text_file(out_dir + "/config.json");
  Result<format::Json> config = format::parse_json(config_text.ok() ? *config_text : "{}", "out");
  ASSERT_TRUE(config.ok());
  EXPECT_EQ((*config)["quantization_config"]["quant_algo"], "NVFP4");
  EXPECT_FALSE(written->fp8_linears);  // bf16 linears: nothing FP8 declared
}

// Binds as `dsv4 check` demands, with NVFP4 experts in every layer (and MTP block).
void expect_binds_cleanly(const checkpoint::LoadedModel& loaded, const SyntheticSummary& summary) {
  const checkpoint::LoadReport& report = loaded.report;
  EXPECT_TRUE(report.clean()) << report.first_problem();
  EXPECT_TRUE(report.unbound_keys.empty());
  EXPECT_TRUE(report.unbound_slots.empty());
  EXPECT_TRUE(report.ignored.empty());
  EXPECT_TRUE(report.zero_tensors.empty());
  EXPECT_TRUE(report.non_finite_tensors.empty());
  EXPECT_EQ(report.n_keys, summary.n_tensors);
  EXPECT_EQ(report.n_bound, report.n_keys);
  const checkpoint::ModelConfig& config = loaded.weights.config;
  EXPECT_EQ(report.storage_census.at("nvfp4 e2m1, e4m3 scale per 16 + global"),
            static_cast<size_t>((config.n_layer + config.n_mtp_layers) * config.n_routed_experts * 3));
  for (const checkpoint::LayerWeights& layer : loaded.weights.layers) {
    EXPECT_TRUE(layer.ffn.experts.is_nvfp4());
  }
}

void expect_finite_forward(const checkpoint::ModelWeights& weights) {
  const std::vector<int64_t> ids = {3, 14, 15, 92, 65, 35, 89, 79};
  for (model::ExpertMode mode : {model::ExpertMode::kW4A16, model::ExpertMode::kW4A4}) {
    const Tensor logits = testing::host_prompt_logits(weights, mode, ids);
    const float* v = logits.data_as<float>();
    int64_t n_finite = 0;
    for (int64_t i = 0; i < logits.numel(); ++i) n_finite += std::isfinite(v[i]) ? 1 : 0;
    EXPECT_EQ(n_finite, logits.numel());
    EXPECT_NE(v[0], v[1]) << "logits should vary";
  }
}

void expect_usable_checkpoint(const std::string& config) {
  testing::TempDir dir;
  const std::string out = dir.file("out");
  Result<SyntheticSummary> summary = synthesize(config, out);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  EXPECT_EQ(summary->n_shards, static_cast<size_t>(kLayers) + 1);
  expect_first_layers_of(config, out);
  Result<checkpoint::LoadedModel> loaded = checkpoint::load_model(out);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_binds_cleanly(*loaded, *summary);
  expect_finite_forward(loaded->weights);
}

TEST(SyntheticCheckpointTest, TransformersStyleConfigBindsAndRuns) {
  expect_usable_checkpoint(tiny_a_config());
}

TEST(SyntheticCheckpointTest, OfficialStyleConfigBindsAndRuns) {
  testing::TempDir dir;
  expect_usable_checkpoint(tiny_flash_config(dir));
}

// --mtp-layers 1: the config's MTP block (its compress_ratios entry kept after the cut layers'),
// bound with its NVFP4 experts, and a finite draft from it.
TEST(SyntheticCheckpointTest, AnMtpBlockBindsAndDrafts) {
  testing::TempDir dir;
  const std::string out = dir.file("out");
  Result<SyntheticSummary> summary =
      synthesize(tiny_flash_config(dir), out, kLayers, /*seed=*/1, /*n_mtp_layers=*/1);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  EXPECT_EQ(summary->n_shards, static_cast<size_t>(kLayers) + 2);
  Result<checkpoint::LoadedModel> loaded = checkpoint::load_model(out);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  expect_binds_cleanly(*loaded, *summary);
  const checkpoint::ModelWeights& w = loaded->weights;
  ASSERT_EQ(w.mtp.size(), 1u);
  EXPECT_EQ(w.config.mtp_layers.front().compress_ratio, 0);  // V4-Flash's: sliding window
  const checkpoint::ModelConfig& c = w.config;
  Result<model::AttentionCache> cache = model::mtp_cache(w, 0, 8);
  ASSERT_TRUE(cache.ok()) << cache.status().to_string();
  const std::vector<int64_t> next = {5, 9};
  Result<Tensor> streams = Tensor::empty(DType::kF32, {2, c.hc_mult, c.hidden_size}, Device::kCpu);
  Result<Tensor> logits = Tensor::empty(DType::kF32, {2, c.vocab_size}, Device::kCpu);
  ASSERT_TRUE(streams.ok() && logits.ok());
  float* x = streams->data_as<float>();
  for (int64_t i = 0; i < streams->numel(); ++i) x[i] = std::sin(0.1f * static_cast<float>(i));
  const model::MtpChunk chunk{streams->view(), next, 0, &*cache, logits->view()};
  ASSERT_TRUE(model::mtp_forward(w, 0, model::ExpertMode::kW4A16, {&chunk, 1}).ok());
  const float* v = logits->data_as<float>();
  for (int64_t i = 0; i < logits->numel(); ++i) ASSERT_TRUE(std::isfinite(v[i])) << i;
  EXPECT_NE(v[0], v[1]) << "logits should vary";
}

// With the release's FP8 linears: each is e4m3 with its block scales, binds as FP8 (the
// loader's census counts it so), decodes to values of a linear's size, and the forward stays
// finite.
TEST(SyntheticCheckpointTest, Fp8LinearsBindAsTheReleaseStoresThem) {
  testing::TempDir dir;
  const std::string config = tiny_flash_config(dir), out = dir.file("out");
  Result<SyntheticSummary> summary = synthesize(config, out, kLayers, 1, 1, /*fp8_linears=*/true);
  ASSERT_TRUE(summary.ok()) << summary.status().to_string();
  Result<checkpoint::LoadedModel> loaded = checkpoint::load_model(out);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  const checkpoint::LoadReport& report = loaded->report;
  EXPECT_TRUE(report.clean()) << report.first_problem();
  EXPECT_EQ(report.n_bound, report.n_keys);
  const checkpoint::ModelWeights& weights = loaded->weights;
  // The config declares them as the release's does, so the memory plans count them at a byte.
  EXPECT_TRUE(weights.config.fp8_linears);
  // Per layer: wq_a, wq_b, wkv, wo_a, wo_b and the shared expert's three; the indexer's wq_b on
  // CSA layers; the MTP block: its layer's eight and e_proj, h_proj.
  size_t want = 0;
  for (int64_t l = 0; l < weights.config.n_layer; ++l) {
    want += 8 + (weights.config.schedule(l).attention == checkpoint::AttentionType::kCompressedSparse ? 1 : 0);
  }
  want += 8 + 2;
  EXPECT_EQ(report.storage_census.at("fp8 e4m3, 128x128 block scales"), want);
  // Decoded on the host: a linear's uniform values (std 1/sqrt(K)) within e4m3's rounding.
  const Tensor& wq_a = weights.layers[0].attn.wq_a;
  ASSERT_EQ(wq_a.dtype(), DType::kF32);
  const int64_t k = wq_a.shape()[1];
  double squares = 0, largest = 0;
  const float* w = wq_a.data_as<float>();
  for (int64_t i = 0; i < wq_a.numel(); ++i) {
    squares += double{w[i]} * w[i];
    largest = std::max(largest, std::abs(double{w[i]}));
  }
  const double rms = std::sqrt(squares / static_cast<double>(wq_a.numel()));
  EXPECT_NEAR(rms * std::sqrt(static_cast<double>(k)), 1.0, 0.1);
  EXPECT_LE(largest * std::sqrt(static_cast<double>(k)), std::sqrt(3.0) * (1 + 1.0 / 16));
  expect_finite_forward(weights);
}

TEST(SyntheticCheckpointTest, RefusesAnMtpLayerCountTheConfigDoesNotHave) {
  testing::TempDir dir;
  Result<SyntheticSummary> summary =
      synthesize(tiny_flash_config(dir), dir.file("out"), kLayers, /*seed=*/1, /*n_mtp_layers=*/2);
  ASSERT_FALSE(summary.ok());
  EXPECT_NE(summary.status().message().find("--mtp-layers 2"), std::string::npos)
      << summary.status().message();
  EXPECT_FALSE(fs::exists(dir.file("out")));
}

TEST(SyntheticCheckpointTest, RefusesANonEmptyOutputDirAndLeavesItUntouched) {
  testing::TempDir dir;
  const std::string out = dir.file("out");
  fs::create_directories(out);
  ASSERT_TRUE(format::write_text_file(out + "/mine.txt", "a user's file").ok());
  Result<SyntheticSummary> summary = synthesize(tiny_a_config(), out);
  ASSERT_FALSE(summary.ok());
  EXPECT_NE(summary.status().message().find("not empty"), std::string::npos)
      << summary.status().to_string();
  std::vector<std::string> names;
  for (const fs::directory_entry& entry : fs::directory_iterator(out)) {
    names.push_back(entry.path().filename().string());
  }
  EXPECT_EQ(names, std::vector<std::string>{"mine.txt"});
  Result<std::string> text = format::read_text_file(out + "/mine.txt");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "a user's file");
}

TEST(SyntheticCheckpointTest, RefusesALayerCountTheConfigDoesNotHave) {
  testing::TempDir dir;
  for (int64_t n_layers : {0, 6}) {  // tiny_a has 5
    Result<SyntheticSummary> summary = synthesize(tiny_a_config(), dir.file("out"), n_layers);
    ASSERT_FALSE(summary.ok());
    EXPECT_NE(summary.status().message().find("--layers " + std::to_string(n_layers)),
              std::string::npos)
        << summary.status().to_string();
    EXPECT_FALSE(fs::exists(dir.file("out")));
  }
}

TEST(SyntheticCheckpointTest, RefusesAMissingConfig) {
  testing::TempDir dir;
  Result<SyntheticSummary> summary = synthesize(dir.file("absent.json"), dir.file("out"));
  ASSERT_FALSE(summary.ok());
  EXPECT_NE(summary.status().message().find("absent.json"), std::string::npos);
}

// Every file of `a` and `b`, by name: whether their bytes are all the same.
bool same_files(const std::string& a, const std::string& b) {
  size_t n_files = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(a)) {
    const std::string name = entry.path().filename().string();
    Result<std::string> bytes_a = format::read_text_file(a + "/" + name);
    Result<std::string> bytes_b = format::read_text_file(b + "/" + name);
    if (!bytes_a.ok() || !bytes_b.ok() || *bytes_a != *bytes_b) return false;
    ++n_files;
  }
  return n_files == static_cast<size_t>(std::distance(fs::directory_iterator(b), {}));
}

TEST(SyntheticCheckpointTest, ASeedWritesTheSameBytesEveryTime) {
  testing::TempDir dir;
  ASSERT_TRUE(synthesize(tiny_a_config(), dir.file("first"), kLayers, 7).ok());
  ASSERT_TRUE(synthesize(tiny_a_config(), dir.file("again"), kLayers, 7).ok());
  ASSERT_TRUE(synthesize(tiny_a_config(), dir.file("other"), kLayers, 8).ok());
  EXPECT_TRUE(same_files(dir.file("first"), dir.file("again")));
  EXPECT_FALSE(same_files(dir.file("first"), dir.file("other")));
}

}  // namespace
}  // namespace dsv4::bench

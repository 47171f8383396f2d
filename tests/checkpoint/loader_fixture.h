// The loader tests' fixture: a tiny synthetic checkpoint written to a temporary directory and
// loaded, and exact comparison of decoded values against its float64 reference.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "checkpoint/loader.h"
#include "checkpoint/synthetic_checkpoint.h"
#include "testing/random.h"
#include "testing/temp_dir.h"

namespace dsv4::checkpoint {

// Every element of `got` (from `offset`) equals the reference rounded once to f32.
inline void expect_matches(const float* got, const std::vector<double>& want,
                           const std::string& what) {
  size_t n_bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != static_cast<float>(want[i]) && n_bad++ == 0) {
      ADD_FAILURE() << what << " element " << i << ": got " << got[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(n_bad, 0u) << what;
}

inline void expect_matches(const Tensor& got, const std::vector<double>& want,
                           const std::string& what) {
  ASSERT_EQ(got.dtype(), DType::kF32) << what;
  ASSERT_EQ(static_cast<size_t>(got.numel()), want.size()) << what;
  expect_matches(got.data_as<float>(), want, what);
}

inline std::vector<double> concat(std::vector<double> a, const std::vector<double>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

inline LoadOptions dense_experts() {
  LoadOptions options;
  options.keep_fp4_packed = false;
  return options;
}

class LoaderTest : public ::testing::Test {
 protected:
  // Writes `ckpt` with `config_json` and loads it.
  Result<LoadedModel> write_and_load(const testing::SyntheticCheckpoint& ckpt,
                                     const std::string& config_json, LoadOptions options = {}) {
    const Status written = ckpt.write(dir_.path(), config_json, rng_.engine());
    EXPECT_TRUE(written.ok()) << written.to_string();
    return load_model(dir_.path(), options);
  }
  testing::SyntheticCheckpoint official(const testing::InventoryOptions& options) {
    return testing::SyntheticCheckpoint(testing::official_inventory(config_, options),
                                        config_.n_routed_experts, rng_.engine());
  }
  static void expect_clean(const LoadReport& report) {
    EXPECT_TRUE(report.problems.empty()) << testing::joined(report.problems);
    EXPECT_TRUE(report.zero_tensors.empty()) << testing::joined(report.zero_tensors);
    EXPECT_TRUE(report.non_finite_tensors.empty()) << testing::joined(report.non_finite_tensors);
  }

  // The official-named slots whose storage varies with the layout, against the reference.
  void expect_official_values(const testing::SyntheticCheckpoint& ckpt, const ModelWeights& w) {
    const int64_t d = config_.hidden_size, f = config_.moe_intermediate_size;
    expect_matches(w.embed, ckpt.matrix("embed.weight", config_.vocab_size, d), "embed");
    expect_matches(w.layers[1].attn.wq_a, ckpt.matrix("layers.1.attn.wq_a.weight", 32, d), "wq_a");
    expect_matches(w.layers[2].attn.wo_b, ckpt.matrix("layers.2.attn.wo_b.weight", d, 32), "wo_b");
    expect_matches(w.layers[1].attn.indexer->wq_b,
                   ckpt.matrix("layers.1.attn.indexer.wq_b.weight", 32, 32), "indexer.wq_b");
    expect_matches(w.layers[0].ffn.shared_expert.w2,
                   ckpt.matrix("layers.0.ffn.shared_experts.w2.weight", d, f), "shared w2");
    EXPECT_EQ(w.mtp.size(), ckpt.has("mtp.0.e_proj.weight") ? 1u : 0u);
    if (!w.mtp.empty()) {
      expect_matches(w.mtp[0].e_proj, ckpt.matrix("mtp.0.e_proj.weight", d, d), "mtp e_proj");
      expect_matches(w.mtp[0].block.attn.wo_b, ckpt.matrix("mtp.0.attn.wo_b.weight", d, 32),
                     "mtp wo_b");
      expect_matches(w.mtp[0].hc_head.fn,
                     ckpt.matrix("mtp.0.hc_head_fn", config_.hc_mult, config_.hc_mult * d),
                     "mtp hc_head fn");
    }
    for (int64_t l = 0; l < config_.n_layer; ++l) {
      const std::string layer = "layer " + std::to_string(l);
      expect_matches(w.layers[l].ffn.experts.w13, official_w13(ckpt, l), layer + " w13");
      expect_matches(w.layers[l].ffn.experts.w2, official_w2(ckpt, l), layer + " w2");
    }
    const testing::StoredBytes& ids = ckpt.at("layers.0.ffn.gate.tid2eid");
    ASSERT_EQ(w.layers[0].ffn.tid2eid.dtype(), DType::kI64);
    EXPECT_EQ(std::memcmp(w.layers[0].ffn.tid2eid.view().data, ids.bytes.data(), ids.bytes.size()),
              0);
  }

  // Layer l's routed experts under official names, stacked as ModelWeights holds them:
  // [E, 2F, D] (each expert's gate rows, then its up rows) and [E, D, F].
  std::vector<double> official_w13(const testing::SyntheticCheckpoint& ckpt, int64_t l) const {
    const int64_t d = config_.hidden_size, f = config_.moe_intermediate_size;
    std::vector<double> w13;
    for (int64_t e = 0; e < config_.n_routed_experts; ++e) {
      const std::string expert = official_expert(l, e);
      w13 = concat(concat(w13, ckpt.matrix(expert + ".w1.weight", f, d)),
                   ckpt.matrix(expert + ".w3.weight", f, d));
    }
    return w13;
  }
  std::vector<double> official_w2(const testing::SyntheticCheckpoint& ckpt, int64_t l) const {
    const int64_t d = config_.hidden_size, f = config_.moe_intermediate_size;
    std::vector<double> w2;
    for (int64_t e = 0; e < config_.n_routed_experts; ++e)
      w2 = concat(w2, ckpt.matrix(official_expert(l, e) + ".w2.weight", d, f));
    return w2;
  }
  static std::string official_expert(int64_t layer, int64_t expert) {
    return "layers." + std::to_string(layer) + ".ffn.experts." + std::to_string(expert);
  }

  testing::SeededRng rng_;
  testing::TempDir dir_;
  ModelConfig config_ = testing::tiny_config();
};

}  // namespace dsv4::checkpoint

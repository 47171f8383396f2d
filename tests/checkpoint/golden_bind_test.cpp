// The checkpoints transformers itself wrote (tests/golden, both layouts) bind with zero problems,
// and the two layouts of one seeded model (tiny_a) decode to bit-identical weights: per-expert
// w1/w3/w2 stacked by the pretrained rules equal the fused gate_up_proj / down_proj taken as is.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "checkpoint/loader.h"

namespace dsv4::checkpoint {
namespace {

std::string golden_model(const std::string& name) {
  const char* root = std::getenv("DSV4_SOURCE_DIR");
  return std::string(root ? root : ".") + "/tests/golden/" + name + "/model";
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) out += line + "\n";
  return out;
}

class GoldenBindTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenBindTest, BindsWithZeroProblems) {
  const std::string name = GetParam();
  Result<LoadedModel> model = load_model(golden_model(name));
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const LoadReport& report = model->report;
  EXPECT_TRUE(report.problems.empty()) << joined(report.problems);
  EXPECT_TRUE(report.zero_tensors.empty()) << joined(report.zero_tensors);
  EXPECT_TRUE(report.non_finite_tensors.empty()) << joined(report.non_finite_tensors);
  EXPECT_EQ(report.n_bound + report.ignored.size(), report.n_keys);
  const NamingConvention want = std::string(name).ends_with("_pretrained")
                                    ? NamingConvention::kPretrained
                                    : NamingConvention::kStateDict;
  EXPECT_EQ(report.convention, want);
}

INSTANTIATE_TEST_SUITE_P(Golden, GoldenBindTest,
                         ::testing::Values("tiny_a_pretrained", "tiny_a_state_dict",
                                           "tiny_b_state_dict", "tiny_c_pretrained",
                                           "tiny_d_state_dict", "tiny_e_pretrained"));

void expect_same(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  EXPECT_EQ(std::memcmp(a.view().data, b.view().data, a.view().bytes()), 0) << what;
}

// tiny_a was written twice from the same seed, once per layout.
TEST(GoldenBindTest, BothLayoutsOfOneModelDecodeIdentically) {
  Result<LoadedModel> pretrained = load_model(golden_model("tiny_a_pretrained"));
  Result<LoadedModel> state_dict = load_model(golden_model("tiny_a_state_dict"));
  ASSERT_TRUE(pretrained.ok() && state_dict.ok());
  const ModelWeights& a = pretrained->weights;
  const ModelWeights& b = state_dict->weights;
  expect_same(a.embed, b.embed, "embed");
  expect_same(a.head, b.head, "head");
  expect_same(a.hc_head.fn, b.hc_head.fn, "hc_head.fn");
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t l = 0; l < a.layers.size(); ++l) {
    const std::string at = "layer " + std::to_string(l);
    expect_same(a.layers[l].hc_attn.fn, b.layers[l].hc_attn.fn, at + " hc_attn.fn");
    expect_same(a.layers[l].attn.wkv, b.layers[l].attn.wkv, at + " attn.wkv");
    expect_same(a.layers[l].attn.kv_norm, b.layers[l].attn.kv_norm, at + " attn.kv_norm");
    expect_same(a.layers[l].ffn.experts.w13, b.layers[l].ffn.experts.w13, at + " experts.w13");
    expect_same(a.layers[l].ffn.experts.w2, b.layers[l].ffn.experts.w2, at + " experts.w2");
    expect_same(a.layers[l].ffn.shared_expert.w1, b.layers[l].ffn.shared_expert.w1,
                at + " shared.w1");
    if (a.layers[l].attn.indexer) {
      expect_same(a.layers[l].attn.indexer->weights_proj, b.layers[l].attn.indexer->weights_proj,
                  at + " indexer.weights_proj");
      expect_same(a.layers[l].attn.indexer->compressor.wkv,
                  b.layers[l].attn.indexer->compressor.wkv, at + " indexer.compressor.wkv");
    }
  }
}

}  // namespace
}  // namespace dsv4::checkpoint

// The whole forward (model/deepseek_v4.h) against transformers, for every oracle folder under
// tests/golden (five configs, both checkpoint layouts): the full-sequence logits of each prompt,
// the greedy continuation decoded with the cache (tokens identical, logits close), the cached
// decode against a full recompute of prompt + continuation, chunked prefill, a batch of
// sequences of different lengths against one sequence at a time, and a long chunk beside short
// ones (mixed_batch.h).
#include "model/deepseek_v4.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "checkpoint/loader.h"
#include "model/golden.h"
#include "model/layerwise_forward.h"
#include "model/mixed_batch.h"
#include "testing/compare.h"
#include "testing/tolerance.h"

namespace dsv4::model {
namespace {

using testing::golden_tensor;
using testing::kGoldenLogitsRelTol;
using testing::max_row_rel_error;

struct Golden {
  checkpoint::LoadedModel loaded;
  format::SafetensorsFile reference;
};

Golden load_golden(const std::string& folder) {
  auto loaded = checkpoint::load_model(testing::golden_path(folder + "/model"));
  EXPECT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_TRUE(loaded->report.clean()) << loaded->report.problems.size() << " problems";
  return {std::move(loaded).value(), testing::open_golden(folder + "/reference.safetensors")};
}

std::vector<int64_t> ids_of(const Tensor& t) {
  return std::vector<int64_t>(t.data_as<int64_t>(), t.data_as<int64_t>() + t.numel());
}

int64_t argmax(const float* row, int64_t n) { return std::max_element(row, row + n) - row; }

int n_prompts(const format::SafetensorsFile& reference) {
  int n = 0;
  while (reference.find("prompt_" + std::to_string(n)) != nullptr) ++n;
  return n;
}

class GoldenModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenModelTest, LogitsAndCachedGreedyMatchTransformers) {
  Golden g = load_golden(GetParam());
  const Model model(g.loaded.weights, ModelOptions{});
  const int64_t v = model.config().vocab_size;
  ASSERT_GT(n_prompts(g.reference), 0);
  for (int p = 0; p < n_prompts(g.reference); ++p) {
    SCOPED_TRACE("prompt " + std::to_string(p));
    const std::string i = std::to_string(p);
    const std::vector<int64_t> prompt = ids_of(golden_tensor(g.reference, "prompt_" + i));
    const std::vector<int64_t> greedy = ids_of(golden_tensor(g.reference, "greedy_" + i));
    const Tensor want_logits = golden_tensor(g.reference, "logits_" + i);
    const Tensor want_greedy_logits = golden_tensor(g.reference, "greedy_logits_" + i);
    const int64_t n = static_cast<int64_t>(prompt.size()),
                  n_gen = static_cast<int64_t>(greedy.size());

    auto cache = model.new_cache(n + n_gen);
    ASSERT_TRUE(cache.ok()) << cache.status().to_string();
    Tensor logits = Tensor::host(DType::kF32, {n, v});
    ASSERT_TRUE(model.forward(prompt, 0, *cache, logits.view()).ok());
    EXPECT_LT(max_row_rel_error(logits.data_as<float>(), want_logits.data_as<float>(), n, v),
              kGoldenLogitsRelTol);

    // Greedy decode with the cache, one token a step, fed the reference's tokens.
    Tensor step_logits = Tensor::host(DType::kF32, {n_gen, v});
    std::copy_n(logits.data_as<float>() + (n - 1) * v, v, step_logits.data_as<float>());
    for (int64_t s = 0; s + 1 < n_gen; ++s) {
      const TensorView row = step_logits.view().rows(s + 1, s + 2);
      ASSERT_TRUE(model.forward({&greedy[s], 1}, n + s, *cache, row).ok());
    }
    for (int64_t s = 0; s < n_gen; ++s) {
      EXPECT_EQ(argmax(step_logits.data_as<float>() + s * v, v), greedy[s]) << "step " << s;
    }
    EXPECT_LT(max_row_rel_error(step_logits.data_as<float>(), want_greedy_logits.data_as<float>(),
                                n_gen, v),
              kGoldenLogitsRelTol);

    // The cached decode against one full forward over prompt + continuation.
    std::vector<int64_t> all = prompt;
    all.insert(all.end(), greedy.begin(), greedy.end() - 1);
    auto fresh = model.new_cache(n + n_gen);
    ASSERT_TRUE(fresh.ok());
    Tensor full = Tensor::host(DType::kF32, {static_cast<int64_t>(all.size()), v});
    ASSERT_TRUE(model.forward(all, 0, *fresh, full.view()).ok());
    EXPECT_LT(max_row_rel_error(full.data_as<float>() + (n - 1) * v, step_logits.data_as<float>(),
                                n_gen, v),
              kGoldenLogitsRelTol);
  }
}

// A layer at a time (model/layerwise_forward.h, what the calibration pass streams) is the same
// forward: every prompt's logits as transformers recorded them.
TEST_P(GoldenModelTest, LayerwiseForwardMatchesTransformers) {
  Golden g = load_golden(GetParam());
  const checkpoint::ModelWeights& w = g.loaded.weights;
  const int64_t v = w.config.vocab_size;
  for (int p = 0; p < n_prompts(g.reference); ++p) {
    SCOPED_TRACE("prompt " + std::to_string(p));
    const std::string i = std::to_string(p);
    const std::vector<int64_t> prompt = ids_of(golden_tensor(g.reference, "prompt_" + i));
    const auto n = static_cast<int64_t>(prompt.size());
    auto forward = LayerwiseForward::start(w.config, w.embed.view(), prompt, nullptr);
    ASSERT_TRUE(forward.ok()) << forward.status().to_string();
    Tensor logits = Tensor::host(DType::kF32, {n, v});
    EXPECT_EQ(forward->logits(w, logits.view()).code(), StatusCode::kInvalidArgument)
        << "logits before the last layer";
    EXPECT_EQ(forward->run_layer(1, w.layers[1]).code(), StatusCode::kInvalidArgument)
        << "a layer out of order";
    for (int64_t layer = 0; layer < w.config.n_layer; ++layer) {
      ASSERT_TRUE(forward->run_layer(layer, w.layers[layer]).ok()) << "layer " << layer;
    }
    ASSERT_TRUE(forward->logits(w, logits.view()).ok());
    const Tensor want = golden_tensor(g.reference, "logits_" + i);
    EXPECT_LT(max_row_rel_error(logits.data_as<float>(), want.data_as<float>(), n, v),
              kGoldenLogitsRelTol);
  }
}

// Prefill in uneven chunks and a batch of two sequences give the numbers of single calls.
TEST_P(GoldenModelTest, ChunkedPrefillAndBatchMatchSingleCalls) {
  Golden g = load_golden(GetParam());
  const Model model(g.loaded.weights, ModelOptions{});
  const int64_t v = model.config().vocab_size;
  const std::vector<int64_t> a = ids_of(golden_tensor(g.reference, "prompt_0"));
  const std::vector<int64_t> b = ids_of(golden_tensor(g.reference, "prompt_1"));
  const Tensor want_a = golden_tensor(g.reference, "logits_0");
  const Tensor want_b = golden_tensor(g.reference, "logits_1");
  const int64_t na = static_cast<int64_t>(a.size()), nb = static_cast<int64_t>(b.size());

  auto cache = model.new_cache(na);
  ASSERT_TRUE(cache.ok());
  Tensor chunked = Tensor::host(DType::kF32, {na, v});
  for (int64_t begin = 0, step = 1; begin < na; begin += step, step += 2) {
    const int64_t end = std::min(na, begin + step);
    const std::span<const int64_t> part(a.data() + begin, end - begin);
    ASSERT_TRUE(model.forward(part, begin, *cache, chunked.view().rows(begin, end)).ok());
  }
  EXPECT_LT(max_row_rel_error(chunked.data_as<float>(), want_a.data_as<float>(), na, v),
            kGoldenLogitsRelTol);

  auto cache_a = model.new_cache(na), cache_b = model.new_cache(nb);
  ASSERT_TRUE(cache_a.ok() && cache_b.ok());
  Tensor la = Tensor::host(DType::kF32, {na, v}), lb = Tensor::host(DType::kF32, {1, v});
  const SequenceChunk batch[] = {{a, 0, &*cache_a, la.view()}, {b, 0, &*cache_b, lb.view()}};
  ASSERT_TRUE(model.forward(batch).ok());
  EXPECT_LT(max_row_rel_error(la.data_as<float>(), want_a.data_as<float>(), na, v),
            kGoldenLogitsRelTol);
  EXPECT_LT(max_row_rel_error(lb.data_as<float>(), want_b.data_as<float>() + (nb - 1) * v, 1, v),
            kGoldenLogitsRelTol);
}

TEST_P(GoldenModelTest, LongChunkBesideShortOnesMatchesTransformers) {
  const Golden g = load_golden(GetParam());
  expect_mixed_batch_matches_transformers(Model(g.loaded.weights, ModelOptions{}), g.reference);
}

TEST_P(GoldenModelTest, BadTokenAndPositionAreRefused) {
  Golden g = load_golden(GetParam());
  const Model model(g.loaded.weights, ModelOptions{});
  auto cache = model.new_cache(8);
  ASSERT_TRUE(cache.ok());
  Tensor logits = Tensor::host(DType::kF32, {1, model.config().vocab_size});
  const int64_t bad = model.config().vocab_size;
  const Status status = model.forward({&bad, 1}, 0, *cache, logits.view());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("vocabulary"), std::string::npos) << status.message();
  const int64_t good = 2;
  EXPECT_EQ(model.forward({&good, 1}, 3, *cache, logits.view()).code(),
            StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(Oracle, GoldenModelTest,
                         ::testing::Values("tiny_a_pretrained", "tiny_a_state_dict",
                                           "tiny_b_state_dict", "tiny_c_pretrained",
                                           "tiny_d_state_dict", "tiny_e_pretrained"));

}  // namespace
}  // namespace dsv4::model

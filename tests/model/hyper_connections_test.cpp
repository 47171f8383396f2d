// mHC (model/hyper_connections.h) against a float64 reference written here from transformers'
// DeepseekV4HyperConnection / DeepseekV4HyperHead / DeepseekV4DecoderLayer, and against the
// submodule outputs transformers recorded for tiny_a (layers.safetensors).
#include "model/hyper_connections.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "model/golden.h"
#include "testing/compare.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4::model {
namespace {

using checkpoint::HyperConnectionWeights;
using checkpoint::ModelConfig;
using testing::golden_tensor;
using testing::max_row_rel_error;
using testing::SeededRng;

Tensor random_tensor(SeededRng& rng, Shape shape, float scale = 1.0f) {
  Tensor t = Tensor::host(DType::kF32, shape);
  std::normal_distribution<float> dist(0.0f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = dist(rng.engine());
  return t;
}

Tensor poisoned(Shape shape) {
  Tensor t = Tensor::host(DType::kF32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = std::nanf("");
  return t;
}

ModelConfig small_config(int64_t m, int64_t d) {
  ModelConfig config;
  config.hc_mult = m;
  config.hidden_size = d;
  config.hc_sinkhorn_iters = 20;
  config.hc_eps = 1e-6;
  config.rms_norm_eps = 1e-6;
  return config;
}

// ---- float64 reference of one token ----
struct RefMix {
  std::vector<double> pre, post, comb, collapsed;
};

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

std::vector<double> ref_mixes(const ModelConfig& c, const float* fn, int64_t n_mix,
                              const float* x) {
  const int64_t n = c.hc_mult * c.hidden_size;
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ss / n + c.rms_norm_eps);
  std::vector<double> mix(n_mix);
  for (int64_t j = 0; j < n_mix; ++j) {
    double acc = 0.0;
    for (int64_t i = 0; i < n; ++i) acc += double(fn[j * n + i]) * x[i] * inv;
    mix[j] = acc;
  }
  return mix;
}

RefMix ref_hc_pre(const ModelConfig& c, const HyperConnectionWeights& w, const float* x) {
  const int64_t m = c.hc_mult, d = c.hidden_size;
  const double eps = c.hc_eps;
  const float* s = w.scale.data_as<float>();
  const float* b = w.base.data_as<float>();
  const std::vector<double> mix = ref_mixes(c, w.fn.data_as<float>(), (2 + m) * m, x);
  RefMix r;
  for (int64_t i = 0; i < m; ++i) {
    r.pre.push_back(sigmoid(mix[i] * s[0] + b[i]) + eps);
    r.post.push_back(2 * sigmoid(mix[m + i] * s[1] + b[m + i]));
  }
  std::vector<double> cm(m * m);
  for (int64_t i = 0; i < m; ++i) {
    double mx = -1e300, sum = 0.0;
    for (int64_t j = 0; j < m; ++j)
      mx = std::max(mx, mix[2 * m + i * m + j] * s[2] + b[2 * m + i * m + j]);
    for (int64_t j = 0; j < m; ++j)
      sum += std::exp(mix[2 * m + i * m + j] * s[2] + b[2 * m + i * m + j] - mx);
    for (int64_t j = 0; j < m; ++j)
      cm[i * m + j] =
          std::exp(mix[2 * m + i * m + j] * s[2] + b[2 * m + i * m + j] - mx) / sum + eps;
  }
  auto cols = [&] {
    for (int64_t j = 0; j < m; ++j) {
      double sum = 0.0;
      for (int64_t i = 0; i < m; ++i) sum += cm[i * m + j];
      for (int64_t i = 0; i < m; ++i) cm[i * m + j] /= sum + eps;
    }
  };
  auto rows = [&] {
    for (int64_t i = 0; i < m; ++i) {
      double sum = 0.0;
      for (int64_t j = 0; j < m; ++j) sum += cm[i * m + j];
      for (int64_t j = 0; j < m; ++j) cm[i * m + j] /= sum + eps;
    }
  };
  cols();
  for (int64_t it = 1; it < c.hc_sinkhorn_iters; ++it) {
    rows();
    cols();
  }
  r.comb = cm;
  r.collapsed.assign(d, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t k = 0; k < d; ++k) r.collapsed[k] += r.pre[i] * x[i * d + k];
  return r;
}

HyperConnectionWeights random_site(SeededRng& rng, int64_t m, int64_t d, int64_t n_mix) {
  HyperConnectionWeights w;
  w.fn = random_tensor(rng, {n_mix, m * d}, 0.3f);
  w.base = random_tensor(rng, {n_mix}, 0.5f);
  w.scale = random_tensor(rng, {n_mix == m ? 1 : 3}, 1.0f);
  return w;
}

class HcTest : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(HcTest, PrePostAndHeadMatchFloat64) {
  const auto [n_tokens, m, d] = GetParam();
  SeededRng rng;
  const ModelConfig config = small_config(m, d);
  const HyperConnectionWeights site_w = random_site(rng, m, d, (2 + m) * m);
  const HyperConnectionWeights head_w = random_site(rng, m, d, m);
  Tensor streams = random_tensor(rng, {n_tokens, m, d}, 2.0f);
  Tensor block_out = random_tensor(rng, {n_tokens, d});

  Tensor block_norm = random_tensor(rng, {d}, 0.1f);
  for (int64_t k = 0; k < d; ++k) block_norm.data_as<float>()[k] += 1.0f;

  HcSite site;
  Tensor x_normed = poisoned({n_tokens, d});
  ASSERT_TRUE(hc_pre_norm(config, site_w, streams.view(), TensorView{}, block_norm.view(), site,
                          x_normed.view())
                  .ok());
  Tensor next = poisoned({n_tokens, m, d});
  ASSERT_TRUE(
      hc_post(config, block_out.view(), TensorView{}, streams.view(), site, next.view()).ok());
  Tensor head = poisoned({n_tokens, d});
  ASSERT_TRUE(hc_head(config, head_w, streams.view(), head.view()).ok());

  for (int t = 0; t < n_tokens; ++t) {
    const float* x = streams.data_as<float>() + t * m * d;
    const RefMix r = ref_hc_pre(config, site_w, x);
    EXPECT_LT(max_row_rel_error(site.pre.data_as<float>() + t * m, r.pre.data(), 1, m), 1e-5);
    EXPECT_LT(max_row_rel_error(site.post.data_as<float>() + t * m, r.post.data(), 1, m), 1e-5);
    EXPECT_LT(max_row_rel_error(site.comb.data_as<float>() + t * m * m, r.comb.data(), 1, m * m),
              1e-5);
    // The block's input: the collapse through its RMS norm.
    double squares = 0.0;
    for (int k = 0; k < d; ++k) squares += r.collapsed[k] * r.collapsed[k];
    const double inv_rms = 1.0 / std::sqrt(squares / d + config.rms_norm_eps);
    std::vector<double> ref_x(d);
    for (int k = 0; k < d; ++k) ref_x[k] = r.collapsed[k] * inv_rms * block_norm.data_as<float>()[k];
    EXPECT_LT(max_row_rel_error(x_normed.data_as<float>() + t * d, ref_x.data(), 1, d), 1e-5);
    // Sinkhorn's result is doubly stochastic (to its eps), and hc_post consumes it transposed.
    for (int j = 0; j < m; ++j) {
      double col = 0.0;
      for (int i = 0; i < m; ++i) col += r.comb[i * m + j];
      EXPECT_NEAR(col, 1.0, 1e-4);
    }
    std::vector<double> ref_next(m * d);
    for (int j = 0; j < m; ++j)
      for (int k = 0; k < d; ++k) {
        double acc = r.post[j] * block_out.data_as<float>()[t * d + k];
        for (int i = 0; i < m; ++i) acc += r.comb[i * m + j] * x[i * d + k];
        ref_next[j * d + k] = acc;
      }
    EXPECT_LT(max_row_rel_error(next.data_as<float>() + t * m * d, ref_next.data(), m, d), 1e-5);
    const std::vector<double> hm = ref_mixes(config, head_w.fn.data_as<float>(), m, x);
    std::vector<double> ref_head(d, 0.0);
    for (int i = 0; i < m; ++i) {
      const double pre =
          sigmoid(hm[i] * head_w.scale.data_as<float>()[0] + head_w.base.data_as<float>()[i]) +
          config.hc_eps;
      for (int k = 0; k < d; ++k) ref_head[k] += pre * x[i * d + k];
    }
    EXPECT_LT(max_row_rel_error(head.data_as<float>() + t * d, ref_head.data(), 1, d), 1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, HcTest,
                         ::testing::Values(std::make_tuple(1, 4, 64), std::make_tuple(5, 2, 48),
                                           std::make_tuple(9, 3, 96)));

// tiny_a layer 2 (weights from the state_dict checkpoint, outputs recorded in the pretrained
// folder: the same model): the attention site from the recorded layer-1 output, the stream update
// with the recorded attention output, then the FFN site; hc_head on the last layer.
TEST(HcGoldenTest, MatchesTransformersTinyA) {
  const auto model = testing::open_golden("tiny_a_state_dict/model/model.safetensors");
  const auto layers = testing::open_golden("tiny_a_pretrained/layers.safetensors");
  const int64_t t = 21, m = 4, d = 128;
  ModelConfig config = small_config(m, d);
  auto site_weights = [&](const std::string& prefix) {
    HyperConnectionWeights w;
    w.fn = golden_tensor(model, prefix + ".fn");
    w.base = golden_tensor(model, prefix + ".base");
    w.scale = golden_tensor(model, prefix + ".scale");
    return w;
  };
  auto expect_close = [&](const Tensor& got, const std::string& name, int64_t cols) {
    const Tensor want = golden_tensor(layers, name);
    EXPECT_LT(
        max_row_rel_error(got.data_as<float>(), want.data_as<float>(), got.numel() / cols, cols),
        testing::kGoldenLayerRelTol)
        << name;
  };
  // Each site's mixes and its block's input: the collapse (out_2) through the block's norm, as
  // transformers recorded the norm's output.
  const auto pre_norm = [&](const std::string& site_name, const std::string& norm_name,
                            const Tensor& streams, HcSite& site) {
    const Tensor norm = golden_tensor(model, "model.layers.2." + norm_name + ".weight");
    Tensor x = poisoned({t, d});
    ASSERT_TRUE(hc_pre_norm(config, site_weights("model.layers.2." + site_name), streams.view(),
                            TensorView{}, norm.view(), site, x.view())
                    .ok());
    expect_close(site.post, "model.layers.2." + site_name + ".out_0", m);
    expect_close(site.comb, "model.layers.2." + site_name + ".out_1", m * m);
    expect_close(x, "model.layers.2." + norm_name, d);
  };
  const Tensor streams = golden_tensor(layers, "model.layers.1", {t, m, d});
  HcSite site;
  pre_norm("attn_hc", "input_layernorm", streams, site);

  const Tensor attn = golden_tensor(layers, "model.layers.2.self_attn.o_b_proj", {t, d});
  Tensor mid = poisoned({t, m, d});
  ASSERT_TRUE(hc_post(config, attn.view(), TensorView{}, streams.view(), site, mid.view()).ok());
  pre_norm("ffn_hc", "post_attention_layernorm", mid, site);

  const Tensor mlp = golden_tensor(layers, "model.layers.2.mlp", {t, d});
  Tensor out = poisoned({t, m, d});
  ASSERT_TRUE(hc_post(config, mlp.view(), TensorView{}, mid.view(), site, out.view()).ok());
  expect_close(out, "model.layers.2", d);

  HyperConnectionWeights head_w;
  head_w.fn = golden_tensor(model, "model.hc_head.hc_fn");
  head_w.base = golden_tensor(model, "model.hc_head.hc_base");
  head_w.scale = golden_tensor(model, "model.hc_head.hc_scale");
  const Tensor last = golden_tensor(layers, "model.layers.4", {t, m, d});
  Tensor head = poisoned({t, d});
  ASSERT_TRUE(hc_head(config, head_w, last.view(), head.view()).ok());
  expect_close(head, "model.hc_head", d);
}

}  // namespace
}  // namespace dsv4::model

// The MoE FFN (model/moe.h) against a float64 reference written here from transformers'
// DeepseekV4SparseMoeBlock (router, experts, shared expert), against the MoE outputs transformers
// recorded for tiny_a (both a hash layer and a score layer), and the NVFP4 expert modes against
// dense experts holding the same (dequantized) weights.
#include "model/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "base/float_convert.h"
#include "format/nvfp4.h"
#include "kernels/ops.h"
#include "model/golden.h"
#include "testing/compare.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4::model {
namespace {

using checkpoint::ModelConfig;
using checkpoint::MoeWeights;
using checkpoint::RoutingType;
using testing::golden_tensor;
using testing::max_row_rel_error;
using testing::SeededRng;

Tensor random_tensor(SeededRng& rng, Shape shape, float scale) {
  Tensor t = Tensor::host(DType::kF32, shape);
  std::normal_distribution<float> dist(0.0f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = dist(rng.engine());
  return t;
}

Tensor poisoned(Shape shape) {
  Tensor t = Tensor::host(DType::kF32, shape);
  std::fill_n(t.data_as<float>(), t.numel(), std::nanf(""));
  return t;
}

ModelConfig moe_config(int64_t d, int64_t e, int64_t k, int64_t f, RoutingType routing) {
  ModelConfig config;
  config.hidden_size = d;
  config.n_routed_experts = e;
  config.n_expert_used = k;
  config.moe_intermediate_size = f;
  config.routed_scaling_factor = 1.5;
  config.swiglu_limit = 1.0;  // small, so the clamp is exercised on random data
  config.layers.push_back({checkpoint::AttentionType::kSliding, 0, routing});
  return config;
}

MoeWeights random_moe(SeededRng& rng, const ModelConfig& c, int64_t vocab) {
  const int64_t d = c.hidden_size, e = c.n_routed_experts, f = c.moe_intermediate_size;
  MoeWeights w;
  w.gate = random_tensor(rng, {e, d}, 0.3f);
  w.bias = random_tensor(rng, {e}, 0.2f);
  w.tid2eid = Tensor::host(DType::kI64, {vocab, c.n_expert_used});
  for (int64_t v = 0; v < vocab; ++v) {
    std::vector<int64_t> ids(e);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng.engine());
    std::copy_n(ids.begin(), c.n_expert_used, w.tid2eid.data_as<int64_t>() + v * c.n_expert_used);
  }
  w.experts.w13 = random_tensor(rng, {e, 2 * f, d}, 0.3f);
  w.experts.w2 = random_tensor(rng, {e, d, f}, 0.3f);
  w.shared_expert.w1 = random_tensor(rng, {f, d}, 0.3f);
  w.shared_expert.w3 = random_tensor(rng, {f, d}, 0.3f);
  w.shared_expert.w2 = random_tensor(rng, {d, f}, 0.3f);
  return w;
}

// ---- float64 reference: one token ----
double swiglu_ref(double g, double u, double limit) {
  g = std::min(g, limit);
  u = std::clamp(u, -limit, limit);
  return g / (1.0 + std::exp(-g)) * u;
}

// How the reference treats the routed experts' activations (x and the SwiGLU output).
enum class ExpertInputs {
  kExact,  // f32 x, float64 hidden: dense experts
  kBf16,   // both rounded to bf16: NVFP4 experts in W4A16
};

float expert_input(double v, ExpertInputs inputs) {
  return inputs == ExpertInputs::kBf16 ? round_to_bf16(static_cast<float>(v))
                                       : static_cast<float>(v);
}

// y[D] += scale · w2 · swiglu(w_gate x, w_up x); gate rows at `gate`, up rows at `up`.
void ffn_ref(const float* x, const float* gate, const float* up, const float* w2, int64_t d,
             int64_t f, double limit, double scale, std::vector<double>& y,
             ExpertInputs inputs = ExpertInputs::kExact) {
  std::vector<double> h(f);
  for (int64_t i = 0; i < f; ++i) {
    double g = 0.0, u = 0.0;
    for (int64_t j = 0; j < d; ++j) {
      g += double(gate[i * d + j]) * expert_input(x[j], inputs);
      u += double(up[i * d + j]) * expert_input(x[j], inputs);
    }
    h[i] = swiglu_ref(g, u, limit);
    if (inputs == ExpertInputs::kBf16) h[i] = expert_input(h[i], inputs);
  }
  for (int64_t o = 0; o < d; ++o) {
    double acc = 0.0;
    for (int64_t i = 0; i < f; ++i) acc += double(w2[o * f + i]) * h[i];
    y[o] += scale * acc;
  }
}

// The K experts `token` (x its row) is routed to, and every expert's sqrtsoftplus score.
std::vector<int64_t> routed_experts(const ModelConfig& c, const MoeWeights& w, const float* x,
                                    int64_t token, std::vector<double>& score) {
  const int64_t d = c.hidden_size, e = c.n_routed_experts, k = c.n_expert_used;
  score.assign(e, 0.0);
  for (int64_t i = 0; i < e; ++i) {
    double logit = 0.0;
    for (int64_t j = 0; j < d; ++j) logit += double(w.gate.data_as<float>()[i * d + j]) * x[j];
    score[i] = std::sqrt(std::log1p(std::exp(logit)));
  }
  std::vector<int64_t> chosen(k);
  if (c.layers[0].routing == RoutingType::kHash) {
    std::copy_n(w.tid2eid.data_as<int64_t>() + token * k, k, chosen.begin());
  } else {
    std::vector<int64_t> order(e);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return score[a] + w.bias.data_as<float>()[a] > score[b] + w.bias.data_as<float>()[b];
    });
    std::copy_n(order.begin(), k, chosen.begin());
  }
  return chosen;
}

std::vector<double> moe_ref(const ModelConfig& c, const MoeWeights& w, const float* x,
                            int64_t token, ExpertInputs inputs = ExpertInputs::kExact) {
  const int64_t d = c.hidden_size, f = c.moe_intermediate_size;
  std::vector<double> score;
  const std::vector<int64_t> chosen = routed_experts(c, w, x, token, score);
  double sum = 0.0;
  for (int64_t id : chosen) sum += score[id];
  std::vector<double> y(d, 0.0);
  for (int64_t id : chosen) {
    const float* w13 = w.experts.w13.data_as<float>() + id * 2 * f * d;
    ffn_ref(x, w13, w13 + f * d, w.experts.w2.data_as<float>() + id * d * f, d, f, c.swiglu_limit,
            score[id] / sum * c.routed_scaling_factor, y, inputs);
  }
  ffn_ref(x, w.shared_expert.w1.data_as<float>(), w.shared_expert.w3.data_as<float>(),
          w.shared_expert.w2.data_as<float>(), d, f, c.swiglu_limit, 1.0, y);
  return y;
}

class MoeTest : public ::testing::TestWithParam<std::tuple<RoutingType, int>> {};

TEST_P(MoeTest, MatchesFloat64) {
  const auto [routing, n_tokens] = GetParam();
  SeededRng rng;
  const int64_t vocab = 50, d = 32;
  const ModelConfig config = moe_config(d, 6, 2, 24, routing);
  const MoeWeights w = random_moe(rng, config, vocab);
  const Tensor x = random_tensor(rng, {n_tokens, d}, 1.0f);
  Tensor tokens = Tensor::host(DType::kI64, {n_tokens});
  for (int t = 0; t < n_tokens; ++t) tokens.data_as<int64_t>()[t] = rng.uniform_int(0, vocab - 1);
  Tensor out = poisoned({n_tokens, d});
  ASSERT_TRUE(
      moe_forward(config, 0, w, ExpertMode::kW4A16, x.view(), tokens.view(), out.view()).ok());
  for (int t = 0; t < n_tokens; ++t) {
    const std::vector<double> ref =
        moe_ref(config, w, x.data_as<float>() + t * d, tokens.data_as<int64_t>()[t]);
    EXPECT_LT(max_row_rel_error(out.data_as<float>() + t * d, ref.data(), 1, d),
              testing::kF32OpRelTol)
        << "token " << t;
  }
}

// A calibration forward records, per routed expert, the amax of the rows it took (x exactly) and
// of their SwiGLU outputs, against float64 routing and SwiGLU; over two forwards the record
// keeps the larger.
TEST_P(MoeTest, RecordsEachExpertsInputAmaxes) {
  const auto [routing, n_tokens] = GetParam();
  SeededRng rng;
  const int64_t vocab = 50, d = 32, f = 24;
  const ModelConfig config = moe_config(d, 6, 2, f, routing);
  const MoeWeights w = random_moe(rng, config, vocab);
  const int64_t e = config.n_routed_experts;
  std::vector<double> want_in(e, 0.0), want_mid(e, 0.0);
  std::vector<int64_t> want_rows(e, 0);
  ExpertAmaxes amaxes(1, e);
  for (float scale : {3.0f, 1.0f}) {  // the first forward's larger amaxes must stay
    const Tensor x = random_tensor(rng, {n_tokens, d}, scale);
    Tensor tokens = Tensor::host(DType::kI64, {n_tokens});
    Tensor out = poisoned({n_tokens, d});
    for (int t = 0; t < n_tokens; ++t) {
      tokens.data_as<int64_t>()[t] = rng.uniform_int(0, vocab - 1);
      const float* row = x.data_as<float>() + t * d;
      std::vector<double> score;
      for (int64_t id : routed_experts(config, w, row, tokens.data_as<int64_t>()[t], score)) {
        ++want_rows[id];
        const float* w13 = w.experts.w13.data_as<float>() + id * 2 * f * d;
        for (int64_t i = 0; i < f; ++i) {
          double g = 0.0, u = 0.0;
          for (int64_t j = 0; j < d; ++j) {
            want_in[id] = std::max(want_in[id], std::fabs(double(row[j])));
            g += double(w13[i * d + j]) * row[j];
            u += double(w13[(f + i) * d + j]) * row[j];
          }
          want_mid[id] = std::max(want_mid[id], std::fabs(swiglu_ref(g, u, config.swiglu_limit)));
        }
      }
    }
    ASSERT_TRUE(
        moe_forward(config, 0, w, ExpertMode::kW4A16, x.view(), tokens.view(), out.view(), &amaxes)
            .ok());
  }
  for (int64_t id = 0; id < e; ++id) {
    const ExpertAmax& got = amaxes.at(0, id);
    EXPECT_EQ(got.rows, want_rows[id]) << "expert " << id;
    EXPECT_EQ(got.gate_up, static_cast<float>(want_in[id])) << "expert " << id;
    EXPECT_NEAR(got.down, want_mid[id], testing::kF32OpRelTol * want_mid[id]) << "expert " << id;
  }
}

INSTANTIATE_TEST_SUITE_P(Routing, MoeTest,
                         ::testing::Combine(::testing::Values(RoutingType::kScore,
                                                              RoutingType::kHash),
                                            ::testing::Values(1, 13)));

// The router alone against transformers' gate outputs: out_1 the scaled weights, out_2 the
// expert ids (unsorted top-k, so compared as id -> weight maps per token).
void expect_routing_matches(const format::SafetensorsFile& layers, const std::string& prefix,
                            const ModelConfig& c, const MoeWeights& w, const Tensor& x,
                            const Tensor& tokens) {
  const int64_t t = x.shape()[0], e = c.n_routed_experts, k = c.n_expert_used;
  Tensor logits = poisoned({t, e}), weights = poisoned({t, k});
  Tensor ids = Tensor::host(DType::kI32, {t, k}), hash_ids = Tensor::host(DType::kI64, {t, k});
  ASSERT_TRUE(kernels::linear(x.view(), w.gate.view(), logits.view()).ok());
  const bool hashed = c.layers[0].routing == RoutingType::kHash;
  if (hashed) {
    ASSERT_TRUE(kernels::embedding(w.tid2eid.view(), tokens.view(), hash_ids.view()).ok());
  }
  ASSERT_TRUE(kernels::moe_route(logits.view(), hashed ? TensorView{} : w.bias.view(),
                                 hashed ? hash_ids.view() : TensorView{},
                                 static_cast<float>(c.routed_scaling_factor),
                                 {weights.view(), ids.view()})
                  .ok());
  const Tensor want_weights = golden_tensor(layers, prefix + "gate.out_1");
  const Tensor want_ids = golden_tensor(layers, prefix + "gate.out_2");
  for (int64_t i = 0; i < t; ++i) {
    std::map<int64_t, float> got, want;
    for (int64_t j = 0; j < k; ++j) {
      got[ids.data_as<int32_t>()[i * k + j]] = weights.data_as<float>()[i * k + j];
      want[static_cast<int64_t>(want_ids.data_as<float>()[i * k + j])] =
          want_weights.data_as<float>()[i * k + j];
    }
    ASSERT_EQ(got.size(), want.size()) << "token " << i;
    for (const auto& [id, weight] : want) {
      ASSERT_TRUE(got.count(id)) << "token " << i << " misses expert " << id;
      EXPECT_NEAR(got[id], weight, 1e-5 * c.routed_scaling_factor) << "token " << i;
    }
  }
}

// tiny_a, prompt_0: layer 0 is hash-routed, layer 2 score-routed. Weights from the state_dict
// checkpoint (stacked experts), submodule outputs from the pretrained folder: the same model.
TEST(MoeGoldenTest, MatchesTransformersTinyA) {
  const auto model = testing::open_golden("tiny_a_state_dict/model/model.safetensors");
  const auto layers = testing::open_golden("tiny_a_pretrained/layers.safetensors");
  const auto reference = testing::open_golden("tiny_a_state_dict/reference.safetensors");
  const Tensor tokens = golden_tensor(reference, "prompt_0");
  const int64_t t = tokens.numel(), d = 128;
  for (int layer : {0, 2}) {
    SCOPED_TRACE(layer);
    const std::string p = "model.layers." + std::to_string(layer) + ".mlp.";
    ModelConfig config =
        moe_config(d, 10, 3, 64, layer < 2 ? RoutingType::kHash : RoutingType::kScore);
    config.swiglu_limit = 10.0;
    MoeWeights w;
    w.gate = golden_tensor(model, p + "gate.weight");
    if (layer < 2) {
      w.tid2eid = golden_tensor(model, p + "gate.tid2eid");
    } else {
      w.bias = golden_tensor(model, p + "gate.e_score_correction_bias");
    }
    w.experts.w13 = golden_tensor(model, p + "experts.gate_up_proj");
    w.experts.w2 = golden_tensor(model, p + "experts.down_proj");
    w.shared_expert.w1 = golden_tensor(model, p + "shared_experts.gate_proj.weight");
    w.shared_expert.w3 = golden_tensor(model, p + "shared_experts.up_proj.weight");
    w.shared_expert.w2 = golden_tensor(model, p + "shared_experts.down_proj.weight");
    const Tensor x = golden_tensor(
        layers, "model.layers." + std::to_string(layer) + ".post_attention_layernorm", {t, d});
    expect_routing_matches(layers, p, config, w, x, tokens);
    Tensor out = poisoned({t, d});
    ASSERT_TRUE(
        moe_forward(config, 0, w, ExpertMode::kW4A16, x.view(), tokens.view(), out.view()).ok());
    const Tensor want = golden_tensor(layers, p.substr(0, p.size() - 1), {t, d});
    EXPECT_LT(max_row_rel_error(out.data_as<float>(), want.data_as<float>(), t, d),
              testing::kGoldenLayerRelTol);
  }
}

Tensor clone(const Tensor& t) {
  Tensor c = Tensor::host(t.dtype(), t.shape());
  std::memcpy(c.view().data, t.view().data, t.view().bytes());
  return c;
}

// A stack [G, N, K] in NVFP4, each matrix with its own global scale (amax / 2688).
format::Nvfp4Tensor quantize(const Tensor& w) {
  const int64_t g = w.shape()[0], n = w.shape()[1], k = w.shape()[2];
  std::vector<format::GlobalScale> scales;
  for (int64_t i = 0; i < g; ++i) {
    scales.push_back(
        format::GlobalScale::from_amax(format::amax_abs(w.data_as<float>() + i * n * k, n * k)));
  }
  auto q = format::quantize_ref(w.data_as<float>(), g, n, k, scales);
  EXPECT_TRUE(q.ok()) << q.status().to_string();
  return std::move(q).value();
}

Tensor dequantize(const format::Nvfp4Tensor& q) {
  auto t = format::dequantize_ref(q.view());
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return std::move(t).value();
}

// NVFP4 experts: W4A16 is the dense function of the dequantized weights applied to bf16-rounded
// expert activations (float64 reference with that rounding); W4A4 adds the activations' 4-bit
// rounding, so it lands near but not on the dense experts.
TEST(MoeNvfp4Test, ModesAgainstDequantizedDenseExperts) {
  SeededRng rng;
  const int64_t d = 64, f = 32, e = 4, n_tokens = 9;
  const ModelConfig config = moe_config(d, e, 2, f, RoutingType::kScore);
  MoeWeights dense = random_moe(rng, config, 10);
  MoeWeights quantized;
  quantized.gate = clone(dense.gate);
  quantized.bias = clone(dense.bias);
  quantized.shared_expert.w1 = clone(dense.shared_expert.w1);
  quantized.shared_expert.w3 = clone(dense.shared_expert.w3);
  quantized.shared_expert.w2 = clone(dense.shared_expert.w2);
  quantized.experts.w13_nvfp4 = quantize(dense.experts.w13);
  quantized.experts.w2_nvfp4 = quantize(dense.experts.w2);
  dense.experts.w13 = dequantize(*quantized.experts.w13_nvfp4);
  dense.experts.w2 = dequantize(*quantized.experts.w2_nvfp4);
  const Tensor x = random_tensor(rng, {n_tokens, d}, 1.0f);
  Tensor tokens = Tensor::host(DType::kI64, {n_tokens});
  std::fill_n(tokens.data_as<int64_t>(), n_tokens, 0);
  Tensor want = poisoned({n_tokens, d}), w4a16 = poisoned({n_tokens, d}),
         w4a4 = poisoned({n_tokens, d});
  ASSERT_TRUE(
      moe_forward(config, 0, dense, ExpertMode::kW4A16, x.view(), tokens.view(), want.view()).ok());
  ASSERT_TRUE(
      moe_forward(config, 0, quantized, ExpertMode::kW4A16, x.view(), tokens.view(), w4a16.view())
          .ok());
  ASSERT_TRUE(
      moe_forward(config, 0, quantized, ExpertMode::kW4A4, x.view(), tokens.view(), w4a4.view())
          .ok());
  for (int64_t t = 0; t < n_tokens; ++t) {
    const std::vector<double> ref =
        moe_ref(config, dense, x.data_as<float>() + t * d, 0, ExpertInputs::kBf16);
    EXPECT_LT(max_row_rel_error(w4a16.data_as<float>() + t * d, ref.data(), 1, d),
              testing::kMoeW4A16RelTol)
        << "token " << t;
  }
  const double a4_error =
      max_row_rel_error(w4a4.data_as<float>(), want.data_as<float>(), n_tokens, d);
  EXPECT_GT(a4_error, testing::kF32OpRelTol) << "W4A4 did not quantize the activations";
  EXPECT_LT(a4_error, testing::kNvfp4ActivationRelTol);
  // A calibration record needs the dense experts the quantizer reads, not quantized ones.
  ExpertAmaxes amaxes(1, e);
  const Status refused = moe_forward(config, 0, quantized, ExpertMode::kW4A16, x.view(),
                                     tokens.view(), w4a16.view(), &amaxes);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("dense"), std::string::npos);
}

}  // namespace
}  // namespace dsv4::model

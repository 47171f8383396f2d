// A random MoE layer for the moe_ffn tests (CPU against float64, CUDA against CPU): NVFP4
// experts quantized by format::quantize_ref from normal weights whose scale changes per block,
// a router whose logits are exact in f32 whatever the summation order (x on a grid of 1/4, the
// gate on a grid of 1/64, |logit| < 2^5: every partial sum is a multiple of 2^-8 below 2^16), so
// the CPU, the GPU and float64 select the same experts, and four routing regimes.
//
// Dimension letters: T tokens, D model width, E routed experts, K experts per token, F expert
// width, V vocab (hash routing).
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "base/buffer.h"
#include "format/nvfp4.h"
#include "kernels/ops.h"
#include "testing/random.h"

namespace dsv4::kernels::moe_test {

enum class Routing {
  kScore,   // small random bias
  kSkewed,  // three experts get most tokens, some get none
  kOneSet,  // every token picks the same K experts: E − K experts idle
  kHash,    // tid2eid
};

struct MoeTestLayer {
  int64_t dim = 0, ffn = 0, n_experts = 0, k_used = 0, vocab = 50;
  Tensor gate, bias, tid2eid;  // f32 [E, D], f32 [E], i64 [V, K]
  format::Nvfp4Tensor w13, w2, shared_w13, shared_w2;
  bool with_shared = true;                 // false: the op runs without its shared expert
  Tensor w13_input_scale, w2_input_scale;  // f32 [1] W4A4 static scales, or empty (dynamic)
  MoeConfig config;

  MoeWeightsView view(bool hash) const {
    return MoeWeightsView{gate.view(),
                          hash ? TensorView{} : bias.view(),
                          hash ? tid2eid.view() : TensorView{},
                          w13.view(),
                          w2.view(),
                          with_shared ? shared_w13.view() : format::Nvfp4View{},
                          with_shared ? shared_w2.view() : format::Nvfp4View{},
                          w13_input_scale.view(),
                          w2_input_scale.view()};
  }
};

// G matrices [N, K] of normal values with a per-block magnitude, each quantized with its own
// global scale.
inline format::Nvfp4Tensor random_nvfp4(dsv4::testing::SeededRng& rng, int64_t g, int64_t n,
                                        int64_t k, double sigma) {
  std::normal_distribution<double> normal(0.0, sigma);
  std::vector<float> w(g * n * k);
  double block_sigma = 1.0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (i % 16 == 0) block_sigma = std::exp2(rng.uniform(-2.0, 1.0));
    w[i] = static_cast<float>(normal(rng.engine()) * block_sigma);
  }
  std::vector<format::GlobalScale> scales;
  for (int64_t m = 0; m < g; ++m) {
    scales.push_back(format::GlobalScale::from_amax(format::amax_abs(w.data() + m * n * k, n * k)));
  }
  Result<format::Nvfp4Tensor> t = format::quantize_ref(w.data(), g, n, k, scales);
  DSV4_CHECK(t.ok(), "quantize_ref failed");
  return std::move(t).value();
}

// The router of `layer` (its dim, n_experts, k_used and vocab set): gate [E, D] on the grid of
// 1/64 in [-1/8, 1/8], bias [E] of the routing regime, tid2eid [V, K] of distinct experts.
inline void make_router(dsv4::testing::SeededRng& rng, Routing routing, MoeTestLayer& layer) {
  const int64_t dim = layer.dim, n_experts = layer.n_experts, k_used = layer.k_used;
  layer.gate = Tensor::host(DType::kF32, {n_experts, dim});
  for (int64_t i = 0; i < n_experts * dim; ++i) {
    layer.gate.data_as<float>()[i] = static_cast<float>(rng.uniform_int(-8, 8)) / 64.0f;
  }
  layer.bias = Tensor::host(DType::kF32, {n_experts});
  for (int64_t e = 0; e < n_experts; ++e) {
    float b = static_cast<float>(rng.uniform(-0.05, 0.05));
    if (routing == Routing::kSkewed && e < 3) b += 0.5f;
    if (routing == Routing::kOneSet && e < k_used) b += 100.0f;
    layer.bias.data_as<float>()[e] = b;
  }
  layer.tid2eid = Tensor::host(DType::kI64, {layer.vocab, k_used});
  std::vector<int64_t> ids(n_experts);
  for (int64_t v = 0; v < layer.vocab; ++v) {
    for (int64_t e = 0; e < n_experts; ++e) ids[e] = e;
    std::shuffle(ids.begin(), ids.end(), rng.engine());
    std::copy_n(ids.begin(), k_used, layer.tid2eid.data_as<int64_t>() + v * k_used);
  }
}

inline MoeTestLayer make_moe_layer(dsv4::testing::SeededRng& rng, int64_t dim, int64_t ffn,
                                   int64_t n_experts, int64_t k_used, Routing routing,
                                   MoeMode mode) {
  MoeTestLayer layer;
  layer.dim = dim, layer.ffn = ffn, layer.n_experts = n_experts, layer.k_used = k_used;
  make_router(rng, routing, layer);
  const double sigma_in = 1.0 / std::sqrt(static_cast<double>(dim));
  const double sigma_out = 1.0 / std::sqrt(static_cast<double>(ffn));
  layer.w13 = random_nvfp4(rng, n_experts, 2 * ffn, dim, 2.0 * sigma_in);
  layer.w2 = random_nvfp4(rng, n_experts, dim, ffn, sigma_out);
  layer.shared_w13 = random_nvfp4(rng, 1, 2 * ffn, dim, 2.0 * sigma_in);
  layer.shared_w2 = random_nvfp4(rng, 1, dim, ffn, sigma_out);
  layer.config = MoeConfig{static_cast<int>(k_used), 2.5f, 1.5f, mode};
  return layer;
}

// x [T, D] on the grid of 1/4 in [-1, 1], never all zero; token ids in [0, V).
inline std::vector<float> random_moe_input(dsv4::testing::SeededRng& rng, int64_t n_tokens,
                                           int64_t dim) {
  std::vector<float> x(n_tokens * dim);
  for (float& v : x) v = static_cast<float>(rng.uniform_int(-4, 4)) / 4.0f;
  x[0] = 1.0f;
  return x;
}

inline std::vector<int64_t> random_token_ids(dsv4::testing::SeededRng& rng, int64_t n_tokens,
                                             int64_t vocab) {
  std::vector<int64_t> ids(n_tokens);
  for (int64_t& id : ids) id = rng.uniform_int(0, vocab - 1);
  return ids;
}

}  // namespace dsv4::kernels::moe_test

#include "kernels/ep/ep_fixture.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

namespace dsv4::kernels::ep {
namespace {

std::vector<float> normal(testing::SeededRng& rng, int64_t n, float sigma) {
  std::normal_distribution<float> dist(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(rng.engine());
  return v;
}

Tensor host_copy(const std::vector<float>& v, Shape shape) {
  Tensor t = Tensor::host(DType::kF32, shape);
  std::copy(v.begin(), v.end(), t.data_as<float>());
  return t;
}

// G random matrices [N, K] in NVFP4, each with its own global scale (amax / 2688).
format::Nvfp4Tensor random_experts(testing::SeededRng& rng, int64_t g, int64_t n, int64_t k) {
  const std::vector<float> w = normal(rng, g * n * k, 0.05f);
  std::vector<format::GlobalScale> scales;
  for (int64_t i = 0; i < g; ++i) {
    scales.push_back(format::GlobalScale::from_amax(format::amax_abs(w.data() + i * n * k, n * k)));
  }
  Result<format::Nvfp4Tensor> q = format::quantize_ref(w.data(), g, n, k, scales);
  DSV4_CHECK(q.ok(), "%s", q.status().to_string().c_str());
  return std::move(*q);
}

}  // namespace

MoeLayer::MoeLayer(testing::SeededRng& rng, const LayerShape& shape, int64_t n_tokens,
                   Routing routing)
    : shape_(shape), n_tokens_(n_tokens) {
  const int64_t d = shape.hidden, f = shape.width, e = shape.n_experts;
  w13_ = random_experts(rng, e, 2 * f, d);
  w2_ = random_experts(rng, e, d, f);
  shared_w13_ = random_experts(rng, 1, 2 * f, d);
  shared_w2_ = random_experts(rng, 1, d, f);
  gate_ = host_copy(normal(rng, e * d, 0.2f), {e, d});
  x_ = host_copy(normal(rng, n_tokens * d, 1.0f), {n_tokens, d});
  token_ids_ = Tensor::host(DType::kI64, {n_tokens});
  for (int64_t t = 0; t < n_tokens; ++t) {
    token_ids_.data_as<int64_t>()[t] = rng.uniform_int(0, shape.vocab - 1);
  }
  weights_ = MoeWeightsView{gate_.view(),     {}, {}, w13_.view(), w2_.view(), shared_w13_.view(),
                            shared_w2_.view()};
  if (routing == Routing::kScore) {
    bias_ = host_copy(normal(rng, e, 0.1f), {e});
    weights_.bias = bias_.view();
  } else {
    make_hash_table(rng, routing);
    weights_.tid2eid = tid2eid_.view();
  }
  config_ = MoeConfig{static_cast<int>(shape.top_k), 1.5f, 7.0f, MoeMode::kW4A4};
  reference_ = Tensor::host(DType::kF32, {n_tokens, d});
  const Status s =
      moe_ffn(x_.view(), token_ids_.view(), weights_, config_, TensorView{}, reference_.view());
  DSV4_CHECK(s.ok(), "moe_ffn reference: %s", s.to_string().c_str());
}

// K distinct experts per vocabulary entry, drawn from a pool: the first max(K, E/4) experts
// (skewed), or expert E-1 in slot 0 plus K-1 of the others.
void MoeLayer::make_hash_table(testing::SeededRng& rng, Routing routing) {
  const int64_t e = shape_.n_experts, k = shape_.top_k;
  tid2eid_ = Tensor::host(DType::kI64, {shape_.vocab, k});
  const int64_t pool = routing == Routing::kSkewed ? std::max(k, e / 4) : e - 1;
  std::vector<int64_t> experts(static_cast<size_t>(pool));
  for (int64_t v = 0; v < shape_.vocab; ++v) {
    std::iota(experts.begin(), experts.end(), int64_t{0});
    std::shuffle(experts.begin(), experts.end(), rng.engine());
    int64_t* row = tid2eid_.data_as<int64_t>() + v * k;
    if (routing == Routing::kOneExpert) {
      row[0] = e - 1;
      std::copy(experts.begin(), experts.begin() + k - 1, row + 1);
    } else {
      std::copy(experts.begin(), experts.begin() + k, row);
    }
  }
}

}  // namespace dsv4::kernels::ep

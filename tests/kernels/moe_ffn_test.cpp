// The fused MoE op on the CPU (kernels/ops.h moe_ffn) against a float64 MoE written here from
// transformers' DeepseekV4SparseMoeBlock: the weights' exact NVFP4 values, sqrt(softplus)
// routing with the bias for selection only, clamped SwiGLU, and the activations staged as the
// mode says (bf16, or NVFP4 through format::quantize_ref with the tensor's amax).
//
// Dimension letters: T tokens, D model width, E routed experts, K experts per token, F expert
// width, S = T·(K+1) expert rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>
#include <vector>

#include "base/float_convert.h"
#include "kernels/ops.h"
#include "moe_test_layer.h"
#include "testing/compare.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4::kernels {
namespace {

using moe_test::MoeTestLayer;
using moe_test::Routing;

std::vector<float> values_of(const format::Nvfp4Tensor& t) {
  Result<Tensor> dense = format::dequantize_ref(t.view());
  DSV4_CHECK(dense.ok(), "dequantize_ref failed");
  return std::vector<float>(dense->data_as<float>(), dense->data_as<float>() + dense->numel());
}

// rows [n, cols] as the mode stages them: bf16-rounded, or NVFP4 with one global scale, the
// static one (f32 [1]) when given, else the rows' amax.
std::vector<double> staged(const std::vector<double>& rows, int64_t n, int64_t cols, MoeMode mode,
                           const Tensor& static_scale) {
  std::vector<float> f(rows.begin(), rows.end());
  if (mode == MoeMode::kW4A16) {
    for (float& v : f) v = round_to_bf16(v);
    return std::vector<double>(f.begin(), f.end());
  }
  const auto scale = static_scale.empty_tensor()
                         ? format::GlobalScale::from_amax(format::amax_abs(f.data(), n * cols))
                         : format::GlobalScale::from_decode(static_scale.data_as<float>()[0]);
  Result<format::Nvfp4Tensor> q = format::quantize_ref(f.data(), n, cols, scale);
  DSV4_CHECK(q.ok(), "quantize_ref failed");
  const std::vector<float> v = values_of(*q);
  return std::vector<double>(v.begin(), v.end());
}

// out[r] = in[r] · w[m]ᵀ for one matrix m of a stack [G, N, K].
std::vector<double> matvec(const double* in, const std::vector<float>& w, int64_t m, int64_t n,
                           int64_t k) {
  std::vector<double> out(n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    const float* row = w.data() + (m * n + i) * k;
    for (int64_t j = 0; j < k; ++j) out[i] += in[j] * row[j];
  }
  return out;
}

std::vector<double> reference_moe(const MoeTestLayer& l, const std::vector<float>& x,
                                  const std::vector<int64_t>& ids, bool hash) {
  const int64_t t_count = static_cast<int64_t>(ids.size()), d = l.dim, f = l.ffn, k = l.k_used;
  const std::vector<float> w13 = values_of(l.w13), w2 = values_of(l.w2);
  const std::vector<float> s13 = values_of(l.shared_w13), s2 = values_of(l.shared_w2);
  const std::vector<double> xs =
      staged(std::vector<double>(x.begin(), x.end()), t_count, d, l.config.mode, l.w13_input_scale);
  std::vector<int64_t> expert(t_count * (k + 1));  // slot k: the shared expert (-1), if any
  std::vector<double> weight(t_count * (k + 1), 1.0);
  for (int64_t t = 0; t < t_count; ++t) {
    std::vector<double> score(l.n_experts);
    for (int64_t e = 0; e < l.n_experts; ++e) {
      double logit = 0.0;
      for (int64_t j = 0; j < d; ++j)
        logit += double(x[t * d + j]) * l.gate.data_as<float>()[e * d + j];
      score[e] = std::sqrt(logit > 20.0 ? logit : std::log1p(std::exp(logit)));
    }
    std::vector<int64_t> order(l.n_experts);
    std::iota(order.begin(), order.end(), 0);
    auto biased = [&](int64_t e) { return score[e] + l.bias.data_as<float>()[e]; };
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return biased(a) > biased(b); });
    double sum = 0.0;
    for (int64_t i = 0; i < k; ++i) {
      expert[t * (k + 1) + i] = hash ? l.tid2eid.data_as<int64_t>()[ids[t] * k + i] : order[i];
      sum += score[expert[t * (k + 1) + i]];
    }
    for (int64_t i = 0; i < k; ++i) {
      weight[t * (k + 1) + i] =
          score[expert[t * (k + 1) + i]] / sum * l.config.routed_scaling_factor;
    }
    expert[t * (k + 1) + k] = -1;
  }
  // Rows of a slot the op does not have (the shared expert's, without one) stay out of the
  // staged tensors, whose dynamic scale they would change.
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < t_count * (k + 1); ++r) {
    if (expert[r] >= 0 || l.with_shared) rows.push_back(r);
  }
  const int64_t n_rows = static_cast<int64_t>(rows.size());
  std::vector<double> act(n_rows * f);
  const double limit = l.config.swiglu_limit;
  for (int64_t i = 0; i < n_rows; ++i) {
    const int64_t r = rows[i], e = expert[r];
    const std::vector<double> h = e < 0 ? matvec(&xs[(r / (k + 1)) * d], s13, 0, 2 * f, d)
                                        : matvec(&xs[(r / (k + 1)) * d], w13, e, 2 * f, d);
    for (int64_t j = 0; j < f; ++j) {
      const double g = std::min(h[j], limit), u = std::clamp(h[f + j], -limit, limit);
      act[i * f + j] = g / (1.0 + std::exp(-g)) * u;
    }
  }
  const std::vector<double> acts = staged(act, n_rows, f, l.config.mode, l.w2_input_scale);
  std::vector<double> y(t_count * d, 0.0);
  for (int64_t i = 0; i < n_rows; ++i) {
    const int64_t r = rows[i], e = expert[r];
    const std::vector<double> o =
        e < 0 ? matvec(&acts[i * f], s2, 0, d, f) : matvec(&acts[i * f], w2, e, d, f);
    for (int64_t j = 0; j < d; ++j) y[(r / (k + 1)) * d + j] += weight[r] * o[j];
  }
  return y;
}

// What the op is given besides the routed experts.
enum class Variant {
  kSharedExpert,  // the NVFP4 shared expert inside the op; dynamic W4A4 scales
  kRoutedOnly,    // no shared expert (the model adds a dense one itself)
  kStaticScales,  // calibrated W4A4 input scales instead of the dynamic ones
};

class MoeFfnTest : public ::testing::TestWithParam<std::tuple<int, Routing, MoeMode, Variant>> {};

TEST_P(MoeFfnTest, MatchesFloat64) {
  const auto [n_tokens, routing, mode, variant] = GetParam();
  dsv4::testing::SeededRng rng;
  MoeTestLayer layer = moe_test::make_moe_layer(rng, 256, 128, 16, 4, routing, mode);
  layer.with_shared = variant != Variant::kRoutedOnly;
  if (variant == Variant::kStaticScales) {
    // Calibrated scales cover less than the data's range (|x| ≤ 1, SwiGLU outputs ~1.5): some
    // elements saturate at ±6 · 448 · scale, which the reference must reproduce too.
    layer.w13_input_scale = Tensor::host(DType::kF32, {1});
    layer.w13_input_scale.data_as<float>()[0] = 0.8f / 2688.0f;
    layer.w2_input_scale = Tensor::host(DType::kF32, {1});
    layer.w2_input_scale.data_as<float>()[0] = 1.0f / 2688.0f;
  }
  std::vector<float> x = moe_test::random_moe_input(rng, n_tokens, layer.dim);
  std::vector<int64_t> ids = moe_test::random_token_ids(rng, n_tokens, layer.vocab);
  std::vector<float> y(x.size(), std::numeric_limits<float>::quiet_NaN());
  const bool hash = routing == Routing::kHash;
  const Shape shape{n_tokens, layer.dim};
  ASSERT_TRUE(moe_ffn(TensorView::contiguous(x.data(), DType::kF32, Device::kCpu, shape),
                      TensorView::contiguous(ids.data(), DType::kI64, Device::kCpu, {n_tokens}),
                      layer.view(hash), layer.config, TensorView{},
                      TensorView::contiguous(y.data(), DType::kF32, Device::kCpu, shape))
                  .ok());
  const std::vector<double> ref = reference_moe(layer, x, ids, hash);
  if (mode == MoeMode::kW4A16) {
    EXPECT_LT(dsv4::testing::max_row_rel_error(y.data(), ref.data(), n_tokens, layer.dim),
              dsv4::testing::kMoeW4A16RelTol);
  } else {
    EXPECT_LT(dsv4::testing::max_row_rel_error(y.data(), ref.data(), 1, n_tokens * layer.dim),
              dsv4::testing::kMoeW4A4RelTol);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MoeFfnTest,
                         ::testing::Combine(::testing::Values(1, 7, 33),
                                            ::testing::Values(Routing::kScore, Routing::kSkewed,
                                                              Routing::kOneSet, Routing::kHash),
                                            ::testing::Values(MoeMode::kW4A16, MoeMode::kW4A4),
                                            ::testing::Values(Variant::kSharedExpert)));
INSTANTIATE_TEST_SUITE_P(
    Variants, MoeFfnTest,
    ::testing::Combine(::testing::Values(1, 7), ::testing::Values(Routing::kScore, Routing::kHash),
                       ::testing::Values(MoeMode::kW4A16, MoeMode::kW4A4),
                       ::testing::Values(Variant::kRoutedOnly, Variant::kStaticScales)));

}  // namespace
}  // namespace dsv4::kernels

// MoE routing on the CPU (transformers DeepseekV4TopKRouter and DeepseekV4HashRouter; the
// official Gate with score_func "sqrtsoftplus"), and the grouping of (token, slot) pairs by
// expert that the grouped expert GEMMs consume.
//
// Dimension letters: T tokens, E routed experts, K experts per token.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/row_matrix.h"

namespace dsv4::kernels::cpu {
namespace {

// torch.nn.functional.softplus with its default threshold: linear above 20, where
// log1p(exp(x)) equals x in f32 anyway.
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// The checks moe_route and moe_select share: [T, K] outputs, and either the hash table or the
// bias. Returns the bias or nullptr.
const float* check_route(const RowMatrix& in, const TensorView& bias, const TensorView& hash_ids,
                         const MoeRouting& out, const RowMatrix& weights) {
  const int64_t n_tokens = in.n_rows, n_experts = in.n_cols, k = weights.n_cols;
  DSV4_CHECK(weights.n_rows == n_tokens && k <= n_experts, "moe_route: weights must be [T, K]");
  DSV4_CHECK(
      out.ids.dtype == DType::kI32 && out.ids.is_contiguous() && out.ids.numel() == n_tokens * k,
      "moe_route: ids must be i32 [T, K]");
  DSV4_CHECK(
      hash_ids.data == nullptr || (hash_ids.dtype == DType::kI64 && hash_ids.is_contiguous() &&
                                   hash_ids.numel() == n_tokens * k && bias.data == nullptr),
      "moe_route: hash_ids must be i64 [T, K], without a bias");
  const float* b = bias.data ? bias.data_as<const float>() : nullptr;
  DSV4_CHECK(!b || (bias.dtype == DType::kF32 && bias.numel() == n_experts), "moe_route: bias [E]");
  return b;
}

// One token's K experts `chosen` and weights `weights` from its scores [E]: the hash table's row
// `fixed` [K] when given, else the top K of scores + b (b may be nullptr).
void select_token(const float* scores, const float* b, const int64_t* fixed, int64_t n_experts,
                  int64_t k, float route_scale, int32_t* chosen, float* weights) {
  if (fixed != nullptr) {
    for (int64_t i = 0; i < k; ++i) {
      DSV4_CHECK(0 <= fixed[i] && fixed[i] < n_experts, "moe_route: hash expert %lld of %lld",
                 (long long)fixed[i], (long long)n_experts);
      chosen[i] = static_cast<int32_t>(fixed[i]);
    }
  } else {
    // Top K of the biased scores; ties go to the lower expert id.
    std::vector<int32_t> order(n_experts);
    std::iota(order.begin(), order.end(), 0);
    auto biased = [&](int32_t e) { return scores[e] + (b ? b[e] : 0.0f); };
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t x, int32_t y) {
      return biased(x) > biased(y) || (biased(x) == biased(y) && x < y);
    });
    std::copy(order.begin(), order.begin() + k, chosen);
  }
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) sum += scores[chosen[i]];
  for (int64_t i = 0; i < k; ++i) weights[i] = scores[chosen[i]] / (sum + 1e-20f) * route_scale;
}

// moe_route's selection over the rows of `scores` (f32 [T, E] scores, or logits whose scores
// `score_of` gives).
template <typename ScoreOf>
void select_rows(const RowMatrix& in, const float* b, const TensorView& hash_ids, float route_scale,
                 const MoeRouting& out, const RowMatrix& weights, ScoreOf score_of) {
  const int64_t n_tokens = in.n_rows, n_experts = in.n_cols, k = weights.n_cols;
  const int64_t* fixed = hash_ids.data ? hash_ids.data_as<const int64_t>() : nullptr;
  int32_t* ids = out.ids.data_as<int32_t>();
#pragma omp parallel for if (n_tokens > 64)
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::vector<float> scores(n_experts);
    for (int64_t e = 0; e < n_experts; ++e) scores[e] = score_of(in.row(t)[e]);
    select_token(scores.data(), b, fixed ? fixed + t * k : nullptr, n_experts, k, route_scale,
                 ids + t * k, weights.row(t));
  }
}

}  // namespace

void moe_route(const TensorView& logits, const TensorView& bias, const TensorView& hash_ids,
               float route_scale, const MoeRouting& out) {
  const RowMatrix in = as_rows(logits, "moe_route logits");
  const RowMatrix weights = as_rows(out.weights, "moe_route weights");
  const float* b = check_route(in, bias, hash_ids, out, weights);
  select_rows(in, b, hash_ids, route_scale, out, weights,
              [](float logit) { return std::sqrt(softplus(logit)); });
}

void moe_select(const TensorView& scores, const TensorView& bias, const TensorView& hash_ids,
                float route_scale, const MoeRouting& out) {
  const RowMatrix in = as_rows(scores, "moe_select scores");
  const RowMatrix weights = as_rows(out.weights, "moe_select weights");
  const float* b = check_route(in, bias, hash_ids, out, weights);
  select_rows(in, b, hash_ids, route_scale, out, weights, [](float score) { return score; });
}

void moe_group(const TensorView& ids, const TensorView& order, const TensorView& offsets) {
  DSV4_CHECK(ids.dtype == DType::kI32 && ids.is_contiguous() && order.dtype == DType::kI32 &&
                 order.numel() == ids.numel() && offsets.dtype == DType::kI32 &&
                 offsets.rank() == 1,
             "moe_group: ids i32 [T, K], order i32 [T·K], offsets i32 [E+1]");
  const int64_t n_slots = ids.numel(), n_experts = offsets.size(0) - 1;
  const int32_t* expert = ids.data_as<const int32_t>();
  int32_t* off = offsets.data_as<int32_t>();
  std::fill(off, off + n_experts + 1, 0);
  for (int64_t s = 0; s < n_slots; ++s) {
    DSV4_CHECK(0 <= expert[s] && expert[s] < n_experts, "moe_group: expert id %d", expert[s]);
    ++off[expert[s] + 1];
  }
  for (int64_t e = 0; e < n_experts; ++e) off[e + 1] += off[e];
  std::vector<int32_t> next(off, off + n_experts);
  int32_t* rows = order.data_as<int32_t>();
  for (int64_t s = 0; s < n_slots; ++s) rows[next[expert[s]]++] = static_cast<int32_t>(s);
}

}  // namespace dsv4::kernels::cpu

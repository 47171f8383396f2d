// Per-row top-k over a prefix of candidates: the lightning indexer's selection (transformers'
// DeepseekV4Indexer masks entries j >= (pos+1)//m with −inf, takes topk, and turns picks that
// land on masked entries into −1). Selecting among the first n_candidates[t] entries and padding
// with −1 is the same set. Equal scores keep the lower index first, a fixed rule where torch
// leaves the order unspecified.
//
// Dimension letters: T tokens, N entries, K picks.
#include <algorithm>
#include <numeric>
#include <vector>

#include "kernels/contracts.h"
#include "kernels/cpu/cpu_ops.h"

namespace dsv4::kernels::cpu {

namespace {

// Checks the operands; row_candidates(t) is how many entries row t picks from.
template <typename Candidates>
void topk_rows(const TensorView& scores, const TensorView& indices, Candidates row_candidates) {
  DSV4_CHECK(scores.dtype == DType::kF32 && scores.rank() == 2 && scores.stride[1] == 1,
             "topk: scores f32 [T, N]");
  DSV4_CHECK(indices.dtype == DType::kI32 && indices.rank() == 2 && indices.stride[1] == 1 &&
                 indices.size(0) == scores.size(0),
             "topk: indices i32 [T, K]");
  const int64_t n_tokens = scores.size(0);
  const int64_t n_entries = scores.size(1);
  const int64_t k = indices.size(1);
#pragma omp parallel if (n_tokens * n_entries > kParallelWork)
  {
    std::vector<int32_t> order;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* row = scores.data_as<const float>() + t * scores.stride[0];
      int32_t* picks = indices.data_as<int32_t>() + t * indices.stride[0];
      const int64_t n = std::clamp<int64_t>(row_candidates(t), 0, n_entries);
      const int64_t n_picked = std::min(n, k);
      order.resize(n);
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(
          order.begin(), order.begin() + n_picked, order.end(),
          [row](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
      for (int64_t j = 0; j < k; ++j) picks[j] = j < n_picked ? order[j] : -1;
    }
  }
}

}  // namespace

void topk(const TensorView& scores, const TensorView& n_candidates, const TensorView& indices) {
  DSV4_CHECK(n_candidates.data == nullptr ||
                 (n_candidates.dtype == DType::kI32 && n_candidates.numel() == scores.size(0)),
             "topk: n_candidates i32 [T] or empty");
  const int32_t* limits = n_candidates.data_as<const int32_t>();
  const int64_t n_entries = scores.size(1);
  topk_rows(scores, indices, [&](int64_t t) { return limits ? limits[t] : n_entries; });
}

void topk(const TensorView& scores, const TensorView& positions, int64_t ratio,
          const TensorView& indices) {
  DSV4_CHECK(ratio >= 1, "topk: ratio %lld", (long long)ratio);
  const int64_t* at = row_table(positions, scores.size(0), "topk positions");
  const int64_t n_entries = scores.size(1);
  topk_rows(scores, indices, [&](int64_t t) { return visible_entries(at[t], ratio, n_entries); });
}

}  // namespace dsv4::kernels::cpu

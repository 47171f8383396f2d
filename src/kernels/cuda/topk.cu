// cuda::topk: one block per row. Each candidate j < n counts the candidates that beat it
// (greater score, or equal score and lower index): that count is its rank, and ranks below K
// are written to their slot. The order (descending, ties to the lower index) is the CPU's,
// exactly, because ranks are computed by the same comparison. O(n²) per row: simple, and
// enough for the indexer's compressed entries of the contexts the tests and golden models use.
//
// Dimension letters: T tokens, N entries, K picks.
#include <algorithm>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace dsv4::kernels::cuda {
namespace {

struct TopkArgs {
  const float* scores;
  int64_t score_stride, n_entries;
  const int32_t* n_candidates;
  int32_t* indices;
  int64_t index_stride, k;
};

__global__ void topk_kernel(TopkArgs a) {
  const int64_t t = blockIdx.x;
  const float* row = a.scores + t * a.score_stride;
  int32_t* picks = a.indices + t * a.index_stride;
  const int64_t n = min(max(int64_t{a.n_candidates[t]}, int64_t{0}), a.n_entries);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float score = row[j];
    int64_t rank = 0;
    for (int64_t i = 0; i < n; ++i) rank += row[i] > score || (row[i] == score && i < j);
    if (rank < a.k) picks[rank] = static_cast<int32_t>(j);
  }
  for (int64_t j = min(n, a.k) + threadIdx.x; j < a.k; j += blockDim.x) picks[j] = -1;
}

}  // namespace

void topk(const TensorView& scores, const TensorView& n_candidates, const TensorView& indices) {
  DSV4_CHECK(scores.dtype == DType::kF32 && scores.rank() == 2 && scores.stride[1] == 1,
             "topk: scores f32 [T, N]");
  DSV4_CHECK(n_candidates.dtype == DType::kI32 && n_candidates.is_contiguous() &&
                 n_candidates.numel() == scores.size(0),
             "topk: n_candidates i32 [T]");
  DSV4_CHECK(indices.dtype == DType::kI32 && indices.rank() == 2 && indices.stride[1] == 1 &&
                 indices.size(0) == scores.size(0),
             "topk: indices i32 [T, K]");
  const TopkArgs a{scores.data_as<const float>(), scores.stride[0], scores.size(1),
                   n_candidates.data_as<const int32_t>(), indices.data_as<int32_t>(),
                   indices.stride[0], indices.size(1)};
  if (scores.size(0) == 0 || a.k == 0) return;
  topk_kernel<<<static_cast<unsigned>(scores.size(0)), kRowThreads, 0, op_stream()>>>(a);
  check_launch();
}

}  // namespace dsv4::kernels::cuda

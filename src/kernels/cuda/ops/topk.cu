// cuda::topk: one block per row, in the CPU's order (descending score, ties to the lower index,
// a -0 equal to +0), exactly.
// - Radix select (K ≤ kMaxSelectK; the released models pick 512 or 1024): every candidate j gets
//   the 64-bit key (order-preserving bits of its score, then ~j), unique and ordered as the
//   CPU's comparator; eight passes of an 8-bit histogram over the row find the K-th largest
//   key, the keys at or above it (exactly K) go to shared memory, and a bitonic sort orders
//   them. O(N) a row: at a 64k-token context the indexer has 16k candidates, which the rank
//   kernel below compares pairwise (~270 M comparisons a row, one block).
// - Ranks, for larger K: each candidate counts the candidates that beat it (greater score, or
//   equal score and lower index); that count is its rank, and ranks below K are written to
//   their slot. O(N²) a row.
// NaN scores (the CPU's comparator leaves their order undefined) go last here.
//
// Dimension letters: T tokens, N entries, K picks.
#include <algorithm>

#include "kernels/contracts.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace dsv4::kernels::cuda {
namespace {

struct TopkArgs {
  const float* scores;
  int64_t score_stride, n_entries;
  const int32_t* n_candidates;  // null: every row's candidates are all n_entries ...
  int32_t* indices;
  int64_t index_stride, k;
  const int64_t* positions;  // ... or those visible at its position (decode rows)
  int64_t ratio;
};

__device__ __forceinline__ int64_t row_candidates(const TopkArgs& a, int64_t t) {
  if (a.positions) return visible_entries(a.positions[t], a.ratio, a.n_entries);
  return a.n_candidates ? min(max(int64_t{a.n_candidates[t]}, int64_t{0}), a.n_entries)
                        : a.n_entries;
}

constexpr int kMaxSelectK = 4096;  // the sort buffer: 32 KB of shared memory

// Larger key, picked first: the score's bits made order-preserving (NaN lowest, -0 as +0),
// then the complement of the index so that ties go to the lower index.
__device__ __forceinline__ uint64_t pick_key(float score, int64_t j) {
  const uint32_t bits = __float_as_uint(score == 0.0f ? 0.0f : score);
  const uint32_t order = isnan(score) ? 0u : (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;
  return (uint64_t{order} << 32) | (0xffffffffu - static_cast<uint32_t>(j));
}

// Warp 0, after a pass's histogram: the digit d holding the rank-th largest key among those
// with the decided prefix, counting from the top bin; writes the prefix with d and the rank
// left within d. Lane l sums bins 255 − 8l … 248 − 8l.
__device__ void select_digit(const uint32_t* histogram, int shift, uint64_t prefix, uint32_t rank,
                             uint64_t* out_prefix, uint32_t* out_rank) {
  const int lane = threadIdx.x % 32;
  uint32_t sum = 0;
  for (int i = 0; i < 8; ++i) sum += histogram[255 - 8 * lane - i];
  uint32_t inclusive = sum;
  for (int offset = 1; offset < 32; offset *= 2) {
    const uint32_t up = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += up;
  }
  const unsigned holder = __ffs(__ballot_sync(0xffffffffu, inclusive >= rank)) - 1;
  if (lane != static_cast<int>(holder)) return;
  uint32_t above = inclusive - sum;
  for (int i = 0; i < 8; ++i) {
    const int bin = 255 - 8 * lane - i;
    if (above + histogram[bin] >= rank) {
      *out_prefix = prefix | (uint64_t(bin) << shift);
      *out_rank = rank - above;
      return;
    }
    above += histogram[bin];
  }
}

// picked[0, p) (p a power of two) sorted descending by the whole block.
__device__ void bitonic_sort_descending(uint64_t* picked, int p) {
  for (int size = 2; size <= p; size *= 2) {
    for (int stride = size / 2; stride > 0; stride /= 2) {
      for (int i = threadIdx.x; i < p; i += blockDim.x) {
        const int j = i ^ stride;
        if (j <= i) continue;
        const bool descending = (i & size) == 0;
        if ((picked[i] < picked[j]) == descending) {
          const uint64_t v = picked[i];
          picked[i] = picked[j];
          picked[j] = v;
        }
      }
      __syncthreads();
    }
  }
}

__global__ void topk_select_kernel(TopkArgs a) {
  extern __shared__ uint64_t picked[];  // [a power of two ≥ K]
  __shared__ uint32_t histogram[256];
  __shared__ uint64_t s_prefix;
  __shared__ uint32_t s_rank;
  __shared__ int s_count;
  const int64_t t = blockIdx.x;
  const float* row = a.scores + t * a.score_stride;
  int32_t* picks = a.indices + t * a.index_stride;
  const int64_t n = row_candidates(a, t);
  const int want = static_cast<int>(min(n, a.k));
  uint64_t threshold = 0;  // the want-th largest key, its bits decided 8 at a time from the top
  uint32_t rank = want;
  for (int shift = 56; shift >= 0 && want > 0; shift -= 8) {
    const uint64_t decided = shift == 56 ? 0 : ~uint64_t{0} << (shift + 8);
    for (int i = threadIdx.x; i < 256; i += blockDim.x) histogram[i] = 0;
    __syncthreads();
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const uint64_t key = pick_key(row[j], j);
      if ((key & decided) == threshold) atomicAdd(&histogram[(key >> shift) & 0xff], 1u);
    }
    __syncthreads();
    if (threadIdx.x < 32) select_digit(histogram, shift, threshold, rank, &s_prefix, &s_rank);
    __syncthreads();
    threshold = s_prefix;
    rank = s_rank;
  }
  int p = 1;
  while (p < want) p *= 2;
  if (threadIdx.x == 0) s_count = 0;
  for (int i = want + threadIdx.x; i < p; i += blockDim.x) picked[i] = 0;  // below every key
  __syncthreads();
  for (int64_t j = threadIdx.x; j < n && want > 0; j += blockDim.x) {
    const uint64_t key = pick_key(row[j], j);
    if (key >= threshold) picked[atomicAdd(&s_count, 1)] = key;
  }
  __syncthreads();
  bitonic_sort_descending(picked, p);
  for (int64_t i = threadIdx.x; i < a.k; i += blockDim.x) {
    picks[i] = i < want ? static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(picked[i])) : -1;
  }
}

__global__ void topk_rank_kernel(TopkArgs a) {
  const int64_t t = blockIdx.x;
  const float* row = a.scores + t * a.score_stride;
  int32_t* picks = a.indices + t * a.index_stride;
  const int64_t n = row_candidates(a, t);
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float score = row[j];
    int64_t rank = 0;
    for (int64_t i = 0; i < n; ++i) rank += row[i] > score || (row[i] == score && i < j);
    if (rank < a.k) picks[rank] = static_cast<int32_t>(j);
  }
  for (int64_t j = min(n, a.k) + threadIdx.x; j < a.k; j += blockDim.x) picks[j] = -1;
}

}  // namespace

namespace {

void launch_topk(const TopkArgs& a, int64_t n_rows) {
  if (n_rows == 0 || a.k == 0) return;
  const auto rows = static_cast<unsigned>(n_rows);
  if (a.k <= kMaxSelectK) {
    int p = 1;
    while (p < a.k) p *= 2;
    topk_select_kernel<<<rows, kRowThreads, p * sizeof(uint64_t), op_stream()>>>(a);
  } else {
    topk_rank_kernel<<<rows, kRowThreads, 0, op_stream()>>>(a);
  }
  check_launch();
}

TopkArgs topk_args(const TensorView& scores, const TensorView& indices) {
  DSV4_CHECK(scores.dtype == DType::kF32 && scores.rank() == 2 && scores.stride[1] == 1,
             "topk: scores f32 [T, N]");
  DSV4_CHECK(indices.dtype == DType::kI32 && indices.rank() == 2 && indices.stride[1] == 1 &&
                 indices.size(0) == scores.size(0),
             "topk: indices i32 [T, K]");
  return TopkArgs{scores.data_as<const float>(),
                  scores.stride[0],
                  scores.size(1),
                  nullptr,
                  indices.data_as<int32_t>(),
                  indices.stride[0],
                  indices.size(1),
                  nullptr,
                  0};
}

}  // namespace

void topk(const TensorView& scores, const TensorView& n_candidates, const TensorView& indices) {
  TopkArgs a = topk_args(scores, indices);
  DSV4_CHECK(n_candidates.data == nullptr ||
                 (n_candidates.dtype == DType::kI32 && n_candidates.is_contiguous() &&
                  n_candidates.numel() == scores.size(0)),
             "topk: n_candidates i32 [T] or empty");
  a.n_candidates = n_candidates.data_as<const int32_t>();
  launch_topk(a, scores.size(0));
}

void topk(const TensorView& scores, const TensorView& positions, int64_t ratio,
          const TensorView& indices) {
  TopkArgs a = topk_args(scores, indices);
  DSV4_CHECK(ratio >= 1, "topk: ratio %lld", (long long)ratio);
  a.positions = row_table(positions, scores.size(0), "topk positions");
  a.ratio = ratio;
  launch_topk(a, scores.size(0));
}

}  // namespace dsv4::kernels::cuda

// cuda::topk: one block per row (or slice of a long row), in the CPU's order (descending score,
// ties to the lower index, a -0 equal to +0), exactly.
// - Radix select (K ≤ kMaxSelectK; the released models pick 512 or 1024): every candidate j gets
//   the 64-bit key (order-preserving bits of its score, then ~j), unique and ordered as the
//   CPU's comparator; eight passes of an 8-bit histogram over the row find the K-th largest
//   key, the keys at or above it (exactly K) go to shared memory, and a bitonic sort orders
//   them. O(N) a row: at a 64k-token context the indexer has 16k candidates, which the rank
//   kernel below compares pairwise (~270 M comparisons a row, one block). The passes stop once
//   the K-th key's bin holds only keys that are picked (its count is the rank left), so scores
//   that differ in their top 24 bits take three passes, not eight; a row of at most K candidates
//   picks them all and only sorts. The picks are the same K keys either way.
// - Ranks, for larger K: each candidate counts the candidates that beat it (greater score, or
//   equal score and lower index); that count is its rank, and ranks below K are written to
//   their slot. O(N²) a row.
// - Long rows (two slices of 32 K candidates or more: a 128k-token context's CSA indexer) spread
//   over blocks: each slice's K largest, then the K largest of those (topk_slice_kernel). The
//   slices' keys are the call's scratch: on a device whose memory the caches took, the call is
//   resource_exhausted (the request fails, not the process).
// NaN scores (the CPU's comparator leaves their order undefined) go last here.
//
// Dimension letters: T tokens, N entries, K picks.
#include <algorithm>

#include "kernels/contracts.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/scratch.h"

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
// with the decided prefix, counting from the top bin; writes the prefix with d, the rank left
// within d, and whether every key of d is picked (the rank left is d's count). Lane l sums bins
// 255 − 8l … 248 − 8l.
__device__ void select_digit(const uint32_t* histogram, int shift, uint64_t prefix, uint32_t rank,
                             uint64_t* out_prefix, uint32_t* out_rank, bool* out_whole_bin) {
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
      *out_whole_bin = histogram[bin] == rank - above;
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

// What a block's select keeps in shared memory besides the picked keys.
struct SelectShared {
  uint32_t histogram[256];
  uint64_t prefix;
  uint32_t rank;
  bool whole_bin;
  int count;
};

// The want largest (want ≤ n) of the keys key_of(i), i < n, into picked[0, want) in no order, by
// the whole block. Keys are unique but for 0s (a split's padding), which are below every key
// picked: the want-th largest is a real key, so a bin picked whole never holds a 0.
template <typename KeyOf>
__device__ void select_largest(KeyOf key_of, int64_t n, int want, uint64_t* picked,
                               SelectShared& sh) {
  // The want-th largest key, its bits decided 8 at a time from the top, or with a whole bin
  // picked, its prefix (its lower bits 0: at or below every key of the bin). With want = n,
  // 0: every key.
  uint64_t threshold = 0;
  uint32_t rank = want;
  for (int shift = 56; shift >= 0 && want > 0 && want < n; shift -= 8) {
    const uint64_t decided = shift == 56 ? 0 : ~uint64_t{0} << (shift + 8);
    for (int i = threadIdx.x; i < 256; i += blockDim.x) sh.histogram[i] = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const uint64_t key = key_of(i);
      if ((key & decided) == threshold) atomicAdd(&sh.histogram[(key >> shift) & 0xff], 1u);
    }
    __syncthreads();
    if (threadIdx.x < 32) {
      select_digit(sh.histogram, shift, threshold, rank, &sh.prefix, &sh.rank, &sh.whole_bin);
    }
    __syncthreads();
    threshold = sh.prefix;
    rank = sh.rank;
    if (sh.whole_bin) break;  // the same in every thread
  }
  if (threadIdx.x == 0) sh.count = 0;
  __syncthreads();
  for (int64_t i = threadIdx.x; i < n && want > 0; i += blockDim.x) {
    const uint64_t key = key_of(i);
    if (key >= threshold) picked[atomicAdd(&sh.count, 1)] = key;
  }
  __syncthreads();
}

// picked[0, want) sorted descending (padded with 0s, below every key, to a power of two), then
// written to row t's picks as indices, −1 past want.
__device__ void write_picks(const TopkArgs& a, int64_t t, uint64_t* picked, int want) {
  int p = 1;
  while (p < want) p *= 2;
  for (int i = want + threadIdx.x; i < p; i += blockDim.x) picked[i] = 0;
  __syncthreads();
  bitonic_sort_descending(picked, p);
  int32_t* picks = a.indices + t * a.index_stride;
  for (int64_t i = threadIdx.x; i < a.k; i += blockDim.x) {
    picks[i] = i < want ? static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(picked[i])) : -1;
  }
}

// A block a row: its K largest keys, sorted, as indices.
__global__ void topk_select_kernel(TopkArgs a) {
  extern __shared__ uint64_t picked[];  // [a power of two ≥ K]
  __shared__ SelectShared sh;
  const int64_t t = blockIdx.x;
  const float* row = a.scores + t * a.score_stride;
  const int64_t n = row_candidates(a, t);
  const int want = static_cast<int>(min(n, a.k));
  select_largest([&](int64_t j) { return pick_key(row[j], j); }, n, want, picked, sh);
  write_picks(a, t, picked, want);
}

// Long rows, over several blocks a row. The K largest keys of the whole row are the K largest of
// the union of each slice's K largest (keys are unique), so block (t, slice) selects its slice's
// [slice · slice_length, + slice_length) K largest into keys[t, slice, 0:K) (0s past its
// candidates), and topk_merge_kernel selects row t's K from its slices' keys: the picks of one
// block a row, bit for bit.
__global__ void topk_slice_kernel(TopkArgs a, int64_t slice_length, uint64_t* keys) {
  extern __shared__ uint64_t picked[];  // [K]
  __shared__ SelectShared sh;
  const int64_t t = blockIdx.x, j0 = int64_t{blockIdx.y} * slice_length;
  const float* row = a.scores + t * a.score_stride;
  const int64_t n = max(min(row_candidates(a, t) - j0, slice_length), int64_t{0});
  const int want = static_cast<int>(min(n, a.k));
  select_largest([&](int64_t i) { return pick_key(row[j0 + i], j0 + i); }, n, want, picked, sh);
  uint64_t* out = keys + (t * gridDim.y + blockIdx.y) * a.k;
  for (int64_t i = threadIdx.x; i < a.k; i += blockDim.x) out[i] = i < want ? picked[i] : 0;
}

__global__ void topk_merge_kernel(TopkArgs a, int n_slices, const uint64_t* keys) {
  extern __shared__ uint64_t picked[];  // [a power of two ≥ K]
  __shared__ SelectShared sh;
  const int64_t t = blockIdx.x;
  const uint64_t* row = keys + t * n_slices * a.k;
  const int want = static_cast<int>(min(row_candidates(a, t), a.k));
  select_largest([&](int64_t i) { return row[i]; }, n_slices * a.k, want, picked, sh);
  write_picks(a, t, picked, want);
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

// Candidates a slice of a long row: 32 K (16384 for V4's 512 picks), so that the merge reads a
// 32nd of the row's keys per slice and rows shorter than two slices (contexts below 128k) stay
// one block a row.
int64_t slice_length(int64_t k) { return 32 * k; }

Status launch_topk(const TopkArgs& a, int64_t n_rows) {
  if (n_rows == 0 || a.k == 0) return ok_status();
  const auto rows = static_cast<unsigned>(n_rows);
  if (a.k > kMaxSelectK) {
    topk_rank_kernel<<<rows, kRowThreads, 0, op_stream()>>>(a);
    check_launch();
    return ok_status();
  }
  int p = 1;
  while (p < a.k) p *= 2;
  const size_t picked_bytes = p * sizeof(uint64_t);
  // Slices a row: as many as its length holds, while the grid is at most an SM a block.
  const int64_t n_slices =
      std::min(ceil_div(a.n_entries, slice_length(a.k)), std::max<int64_t>(1, sm_count() / n_rows));
  if (n_slices < 2) {
    topk_select_kernel<<<rows, kRowThreads, picked_bytes, op_stream()>>>(a);
    check_launch();
    return ok_status();
  }
  DSV4_ASSIGN_OR_RETURN(
      const Scratch keys,
      Scratch::allocate(static_cast<size_t>(n_rows * n_slices * a.k) * sizeof(uint64_t)));
  topk_slice_kernel<<<dim3(rows, static_cast<unsigned>(n_slices)), kRowThreads, picked_bytes,
                      op_stream()>>>(a, ceil_div(a.n_entries, n_slices), keys.as<uint64_t>());
  check_launch();
  topk_merge_kernel<<<rows, kRowThreads, picked_bytes, op_stream()>>>(a, static_cast<int>(n_slices),
                                                                      keys.as<uint64_t>());
  check_launch();
  return ok_status();
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

Status topk(const TensorView& scores, const TensorView& n_candidates, const TensorView& indices) {
  TopkArgs a = topk_args(scores, indices);
  DSV4_CHECK(n_candidates.data == nullptr ||
                 (n_candidates.dtype == DType::kI32 && n_candidates.is_contiguous() &&
                  n_candidates.numel() == scores.size(0)),
             "topk: n_candidates i32 [T] or empty");
  a.n_candidates = n_candidates.data_as<const int32_t>();
  return launch_topk(a, scores.size(0));
}

Status topk(const TensorView& scores, const TensorView& positions, int64_t ratio,
            const TensorView& indices) {
  TopkArgs a = topk_args(scores, indices);
  DSV4_CHECK(ratio >= 1, "topk: ratio %lld", (long long)ratio);
  a.positions = row_table(positions, scores.size(0), "topk positions");
  a.ratio = ratio;
  return launch_topk(a, scores.size(0));
}

}  // namespace dsv4::kernels::cuda

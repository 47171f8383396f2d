// cuda::indexer_scores: a warp per (query, entry), its lanes over the heads, the same sum over
// heads of weighted ReLU'd dot products as the CPU reference (kernels/cpu/indexer.cpp), in the
// same order: each head's dot over DI in order, then the heads added in order by one lane.
//
// Why a warp and not a thread per pair: a decode step has one query and few entries (N = the
// context / 4), and a thread per pair left one block of a handful of busy threads doing
// HI·DI = 8192 dependent multiply-adds each: 440 µs a CSA layer at one token (ncu, H200),
// more than the rest of the layer. Lanes over the heads spread that over the warp,
// with the query in shared memory (one block's rows of padded heads, so the lanes' same-d reads
// hit different banks) and each key element one broadcast load.
//
// Dimension letters: T tokens, HI indexer heads, DI indexer head dim, N compressed entries.
#include <algorithm>

#include "kernels/contracts.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace dsv4::kernels::cuda {
namespace {

struct ScoreArgs {
  const float* q;        // [T, HI, DI]
  const float* keys;     // [N, DI]
  const float* weights;  // [T, HI]
  IndexerDims dims;      // T, HI, DI, N and the per-row keys of decode rows
  float q_scale, weight_scale;
  float* scores;  // [T, N]
};

constexpr int kScoreWarps = 8;
// Entries a warp scores: up to 8 (a block's query rows then serve 64 entries), fewer when the
// call has too few (query, entry) pairs to fill the GPU: a decode query at position 255 has 64
// entries, and one block for all of them took ~100 µs a CSA layer; eight blocks of one entry a
// warp take ~12 µs (ncu, H100; docs/bench_log.md, "V4-Flash shapes": the decode step's indexer).
constexpr int kMaxEntriesPerWarp = 8;

// Dynamic shared memory: query t's rows [HI][DI + 1], then each warp's head terms [HI] and key
// [DI].
size_t score_smem_bytes(int64_t n_heads, int64_t head_dim) {
  return sizeof(float) *
         static_cast<size_t>(n_heads * (head_dim + 1) + kScoreWarps * (n_heads + head_dim));
}

// Block (t, y): query t's entries [B y, B y + B), B = 8 · entries_per_warp, entry B y + 8 e + w
// on warp w (tokens on the grid's x, which has room for any prompt). A warp copies its entry's
// key into shared memory first (its loads all in flight; read from L1 element by element, each
// dot waited one load latency a step).
__global__ void __launch_bounds__(32 * kScoreWarps)
    indexer_scores_kernel(ScoreArgs a, int entries_per_warp) {
  extern __shared__ float smem_scores[];
  const int64_t t = blockIdx.x;
  const int n_heads = static_cast<int>(a.dims.n_heads),
            head_dim = static_cast<int>(a.dims.head_dim);
  const float* keys = row_keys(a.dims, a.keys, t);
  const int64_t n_keys = row_n_keys(a.dims, t);
  const int stride = head_dim + 1;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float* query = smem_scores;
  float* terms = smem_scores + n_heads * stride + warp * n_heads;
  float* key = smem_scores + n_heads * stride + kScoreWarps * n_heads + warp * head_dim;
  const float* q_t = a.q + t * n_heads * head_dim;
  for (int h = warp; h < n_heads; h += kScoreWarps) {
    for (int d = lane; d < head_dim; d += 32) query[h * stride + d] = q_t[h * head_dim + d];
  }
  __syncthreads();
  const float* weights = a.weights + t * n_heads;
  for (int e = 0; e < entries_per_warp; ++e) {
    const int64_t n = (blockIdx.y * int64_t{entries_per_warp} + e) * kScoreWarps + warp;
    if (n >= n_keys) return;
    for (int d = lane; d < head_dim; d += 32) key[d] = keys[n * head_dim + d];
    __syncwarp();
    for (int h = lane; h < n_heads; h += 32) {
      const float* query_h = query + h * stride;
      float dot = 0.0f;
      for (int d = 0; d < head_dim; ++d) dot += query_h[d] * key[d];
      terms[h] = (weights[h] * a.weight_scale) * (fmaxf(dot, 0.0f) * a.q_scale);
    }
    __syncwarp();
    if (lane == 0) {
      float total = 0.0f;
      for (int h = 0; h < n_heads; ++h) total += terms[h];
      a.scores[t * a.dims.n_entries + n] = total;
    }
    __syncwarp();  // lane 0's reads of terms, every lane's of key, before the next entry's writes
  }
}

}  // namespace

void indexer_scores(const IndexerScoreParams& p) {
  const IndexerDims dims = indexer_dims(p);
  const int64_t n_tokens = dims.n_tokens, n_heads = dims.n_heads, head_dim = dims.head_dim;
  const int64_t n_entries = dims.n_entries;
  const ScoreArgs a{p.q.data_as<const float>(),
                    p.keys.data_as<const float>(),
                    p.weights.data_as<const float>(),
                    dims,
                    p.q_scale,
                    p.weight_scale,
                    p.scores.data_as<float>()};
  if (n_tokens * n_entries == 0) return;
  const size_t smem_bytes = score_smem_bytes(n_heads, head_dim);
  if (smem_bytes > 48 * 1024) {
    allow_dynamic_smem(indexer_scores_kernel, static_cast<int>(smem_bytes));
  }
  // Two blocks an SM at least where the pairs allow, else 8 entries a warp.
  const int64_t per_warp = ceil_div(n_tokens * n_entries, int64_t{2} * sm_count() * kScoreWarps);
  const int entries_per_warp =
      static_cast<int>(std::clamp<int64_t>(per_warp, 1, kMaxEntriesPerWarp));
  const dim3 grid(
      static_cast<unsigned>(n_tokens),
      static_cast<unsigned>(ceil_div(n_entries, int64_t{kScoreWarps} * entries_per_warp)));
  indexer_scores_kernel<<<grid, 32 * kScoreWarps, smem_bytes, op_stream()>>>(a, entries_per_warp);
  check_launch();
}

}  // namespace dsv4::kernels::cuda

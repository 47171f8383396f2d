// cuda::indexer_scores: one thread per (query, entry), the same sum over heads of weighted
// ReLU'd dot products as the CPU reference (kernels/cpu/indexer.cpp), in the same order.
//
// Dimension letters: T tokens, HI indexer heads, DI indexer head dim, N compressed entries.
#include "kernels/contracts.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace dsv4::kernels::cuda {
namespace {

struct ScoreArgs {
  const float* q;        // [T, HI, DI]
  const float* keys;     // [N, DI]
  const float* weights;  // [T, HI]
  int64_t n_tokens, n_heads, head_dim, n_entries;
  float q_scale, weight_scale;
  float* scores;  // [T, N]
};

__global__ void indexer_scores_kernel(ScoreArgs a) {
  const int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (idx >= a.n_tokens * a.n_entries) return;
  const int64_t t = idx / a.n_entries, n = idx % a.n_entries;
  const float* key = a.keys + n * a.head_dim;
  float total = 0.0f;
  for (int64_t h = 0; h < a.n_heads; ++h) {
    const float* query = a.q + (t * a.n_heads + h) * a.head_dim;
    float dot = 0.0f;
    for (int64_t d = 0; d < a.head_dim; ++d) dot += query[d] * key[d];
    total += (a.weights[t * a.n_heads + h] * a.weight_scale) * (fmaxf(dot, 0.0f) * a.q_scale);
  }
  a.scores[idx] = total;
}

}  // namespace

void indexer_scores(const IndexerScoreParams& p) {
  const auto [n_tokens, n_heads, head_dim, n_entries] = indexer_dims(p);
  const ScoreArgs a{p.q.data_as<const float>(),
                    p.keys.data_as<const float>(),
                    p.weights.data_as<const float>(),
                    n_tokens,
                    n_heads,
                    head_dim,
                    n_entries,
                    p.q_scale,
                    p.weight_scale,
                    p.scores.data_as<float>()};
  if (n_tokens * n_entries == 0) return;
  indexer_scores_kernel<<<element_blocks(n_tokens * n_entries), kElementThreads, 0, op_stream()>>>(
      a);
  check_launch();
}

}  // namespace dsv4::kernels::cuda

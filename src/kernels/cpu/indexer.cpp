// Lightning-indexer scores (transformers' DeepseekV4IndexerScorer): for query t and compressed
// entry n, Σ_h (w[t,h]·weight_scale) · (ReLU(q[t,h] · k[n])·q_scale), in f32 in that order of
// products. transformers has no Hadamard rotation or FP4 simulation here (the official
// reference does; ../shared/docs/deepseek_v4.md §2.4.5) and neither do we.
//
// Dimension letters: T tokens, HI indexer heads, DI indexer head dim, N compressed entries.
#include <algorithm>

#include "kernels/contracts.h"
#include "kernels/cpu/cpu_ops.h"

namespace dsv4::kernels::cpu {

void indexer_scores(const IndexerScoreParams& p) {
  const IndexerDims dims = indexer_dims(p);
  const int64_t n_tokens = dims.n_tokens, n_heads = dims.n_heads, head_dim = dims.head_dim;
  const int64_t n_entries = dims.n_entries;
  const float* q = p.q.data_as<const float>();
  const float* keys = p.keys.data_as<const float>();
  const float* weights = p.weights.data_as<const float>();
  float* scores = p.scores.data_as<float>();
#pragma omp parallel for collapse(2) \
    schedule(static) if (n_tokens * n_entries * n_heads * head_dim > kParallelWork)
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t n = 0; n < n_entries; ++n) {
      if (n >= row_n_keys(dims, t)) continue;  // a decode row's entries end earlier
      const float* key = row_keys(dims, keys, t) + n * head_dim;
      float total = 0.0f;
      for (int64_t h = 0; h < n_heads; ++h) {
        const float* query = q + (t * n_heads + h) * head_dim;
        float dot = 0.0f;
        for (int64_t d = 0; d < head_dim; ++d) dot += query[d] * key[d];
        total += (weights[t * n_heads + h] * p.weight_scale) * (std::max(dot, 0.0f) * p.q_scale);
      }
      scores[t * n_entries + n] = total;
    }
  }
}

}  // namespace dsv4::kernels::cpu

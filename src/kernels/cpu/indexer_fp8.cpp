// The reference of the fast profile's indexer scores (kernels/ops.h indexer_scores_fp8;
// DeepSeek-V3.2's act_quant + fp8_index): each query head row and each key quantized to E4M3
// with one power-of-two scale of its DI values, exactly as the CUDA kernel quantizes them (the
// same scale bits, round to nearest even), then the products of the E4M3 values summed in
// float64 (exact: 2⁻¹⁸ … 2¹⁸ fits a double's 53 bits for DI ≤ 128), and
//   scores[t,n] = s_k[n] · Σ_h ReLU(dot) · ((w[t,h]·weight_scale)·(q_scale·s_q[t,h])).
//
// Dimension letters: T tokens, HI indexer heads, DI indexer head dim, N compressed entries.
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/float_convert.h"
#include "kernels/contracts.h"
#include "kernels/cpu/cpu_ops.h"

namespace dsv4::kernels::cpu {
namespace {

// The E4M3 values of a row of n (as floats) and its scale.
float quantize_row(const float* x, int64_t n, float* values) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float scale = fp8_group_scale(amax);
  for (int64_t i = 0; i < n; ++i) values[i] = e4m3_to_float(float_to_e4m3(x[i] / scale));
  return scale;
}

}  // namespace

void indexer_scores_fp8(const IndexerScoreParams& p) {
  const IndexerDims dims = indexer_fp8_dims(p);
  const int64_t n_tokens = dims.n_tokens, n_heads = dims.n_heads, head_dim = dims.head_dim;
  const int64_t n_entries = dims.n_entries;
  const float* q = p.q.data_as<const float>();
  const float* weights = p.weights.data_as<const float>();
  float* scores = p.scores.data_as<float>();
#pragma omp parallel if (n_tokens * n_entries * n_heads * head_dim > kParallelWork)
  {
    std::vector<float> query(n_heads * head_dim), head_weight(n_heads), key(head_dim);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t h = 0; h < n_heads; ++h) {
        const float s_q = quantize_row(q + (t * n_heads + h) * head_dim, head_dim,
                                       query.data() + h * head_dim);
        head_weight[h] = (weights[t * n_heads + h] * p.weight_scale) * (p.q_scale * s_q);
      }
      const float* keys = row_keys(dims, p.keys.data_as<const float>(), t);
      for (int64_t n = 0; n < row_n_keys(dims, t); ++n) {
        const float s_k = quantize_row(keys + n * head_dim, head_dim, key.data());
        double total = 0.0;
        for (int64_t h = 0; h < n_heads; ++h) {
          double dot = 0.0;
          for (int64_t d = 0; d < head_dim; ++d) dot += double{query[h * head_dim + d]} * key[d];
          total += std::max(dot, 0.0) * head_weight[h];
        }
        scores[t * n_entries + n] = static_cast<float>(total * s_k);
      }
    }
  }
}

}  // namespace dsv4::kernels::cpu

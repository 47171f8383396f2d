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
#include "kernels/fp8_scale.h"
#include "kernels/cpu/cpu_ops.h"

namespace dsv4::kernels::cpu {
namespace {

// The E4M3 values of a row of n (as floats) and its scale.
float quantize_row(const float* x, int64_t n, float* values) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float scale = fp8_activation_scale(amax);
  for (int64_t i = 0; i < n; ++i) values[i] = e4m3_to_float(float_to_e4m3(x[i] / scale));
  return scale;
}

}  // namespace

void indexer_scores_fp8(const IndexerScoreParams& p) {
  const IndexerDims d = indexer_fp8_dims(p);
  const float* weights = p.weights.data_as<const float>();
#pragma omp parallel if (d.n_tokens * d.n_entries * d.n_heads * d.head_dim > kParallelWork)
  {
    // Per query: its heads' E4M3 rows and weights; per key: its E4M3 row.
    std::vector<float> query(d.n_heads * d.head_dim), head_weight(d.n_heads), key(d.head_dim);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < d.n_tokens; ++t) {
      for (int64_t h = 0; h < d.n_heads; ++h) {
        const float s_q =
            quantize_row(p.q.data_as<const float>() + (t * d.n_heads + h) * d.head_dim, d.head_dim,
                         query.data() + h * d.head_dim);
        head_weight[h] = (weights[t * d.n_heads + h] * p.weight_scale) * (p.q_scale * s_q);
      }
      const float* keys = row_keys(d, p.keys.data_as<const float>(), t);
      for (int64_t n = 0; n < row_n_keys(d, t); ++n) {
        const float s_k = quantize_row(keys + n * d.head_dim, d.head_dim, key.data());
        double total = 0.0;
        for (int64_t h = 0; h < d.n_heads; ++h) {
          double dot = 0.0;
          for (int64_t i = 0; i < d.head_dim; ++i)
            dot += double{query[h * d.head_dim + i]} * key[i];
          total += std::max(dot, 0.0) * head_weight[h];
        }
        p.scores.data_as<float>()[t * d.n_entries + n] = static_cast<float>(total * s_k);
      }
    }
  }
}

}  // namespace dsv4::kernels::cpu

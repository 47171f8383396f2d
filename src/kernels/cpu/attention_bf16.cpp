// The reference of the fast profile's sparse attention (kernels/ops.h sparse_attention_bf16):
// the candidates of cpu/attention.cpp, with q and every row rounded to bf16 as the tensor cores
// see them, each logit q·row a float64 sum of those values, the softmax with the sink in f32 as
// the exact reference does it, and Σ_j p_j·row_j in float64. The GPU kernel also rounds its
// unnormalised probabilities to bf16 before weighting the rows; this reference keeps them, so
// the two differ by at most 2⁻⁹ of each probability's share plus f32 summation error (the
// bound the CUDA test states). With out_fp8 the output then goes through rope_fp8, as the
// contract defines it.
//
// Dimension letters: T tokens, H heads, Dh head dim, K candidates of a query.
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/float_convert.h"
#include "kernels/contracts.h"
#include "kernels/cpu/candidate_rows.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/fp8_operands.h"

namespace dsv4::kernels::cpu {

void sparse_attention_bf16(const SparseAttentionParams& p) {
  const AttentionCall c(p);
  const int64_t n_heads = c.o.n_heads, head_dim = c.o.head_dim;
  check_fast_attention_head_dim(head_dim);
#pragma omp parallel if (c.work() > kParallelWork)
  {
    std::vector<const float*> rows;
    std::vector<float> rounded;  // [K, Dh] the query's rows in bf16
    std::vector<float> query(head_dim);
    std::vector<float> weights;  // the probabilities, unnormalised
    std::vector<double> sum(head_dim);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < c.o.n_tokens; ++t) {
      gather_rows(c.sources, t, head_dim, rows);
      const auto n_rows = static_cast<int64_t>(rows.size());
      rounded.resize(n_rows * head_dim);
      for (int64_t j = 0; j < n_rows; ++j) {
        for (int64_t d = 0; d < head_dim; ++d)
          rounded[j * head_dim + d] = round_to_bf16(rows[j][d]);
      }
      weights.resize(n_rows);
      for (int64_t h = 0; h < n_heads; ++h) {
        const int64_t offset = (t * n_heads + h) * head_dim;
        for (int64_t d = 0; d < head_dim; ++d) query[d] = round_to_bf16(c.q[offset + d]);
        float max_logit = c.sinks[h];
        for (int64_t j = 0; j < n_rows; ++j) {
          double dot = 0.0;
          for (int64_t d = 0; d < head_dim; ++d)
            dot += double{query[d]} * rounded[j * head_dim + d];
          weights[j] = static_cast<float>(dot) * p.scale;
          max_logit = std::max(max_logit, weights[j]);
        }
        float denom = std::exp(c.sinks[h] - max_logit);
        for (float& w : weights) {
          w = std::exp(w - max_logit);
          denom += w;
        }
        std::fill(sum.begin(), sum.end(), 0.0);
        for (int64_t j = 0; j < n_rows; ++j) {
          for (int64_t d = 0; d < head_dim; ++d) {
            sum[d] += double{weights[j]} * rounded[j * head_dim + d];
          }
        }
        for (int64_t d = 0; d < head_dim; ++d) {
          c.out[offset + d] = static_cast<float>(sum[d] / denom);
        }
      }
    }
  }
  // wo_a's input, as the contract defines it: rope_fp8 of the output.
  if (attention_fp8_out(p).wanted) {
    cpu::rope_fp8(p.out, p.rope_positions, p.rope_inv_freq, RopeDirection::kInverse, p.out_fp8);
  }
}

}  // namespace dsv4::kernels::cpu

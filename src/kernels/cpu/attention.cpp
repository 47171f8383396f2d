// The attention core of DeepSeek-V4 (../shared/docs/deepseek_v4.md §2.4.6): every query gathers
// its candidate K=V rows by index from two sources (the sliding-window ring and the compressed
// entries), and a per-head sink logit joins the softmax denominator without a value. This is
// transformers' eager_attention_forward with the sink column concatenated and dropped, written
// over index lists instead of a dense [T, N] mask so that its cost is O(T·H·K·Dh) whatever the
// context length (the shape of FlashMLA's sparse decode kernel).
//
// Dimension letters: T tokens, H heads, Dh head dim, K candidates per query (both sources).
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/contracts.h"
#include "kernels/cpu/candidate_rows.h"
#include "kernels/cpu/cpu_ops.h"

namespace dsv4::kernels::cpu {
namespace {

// out = Σ_j softmax_j(logits ∪ {sink}) · rows[j]; the max includes the sink, as transformers
// subtracts the max of the concatenated logits.
void attend_one_head(const float* q, const std::vector<const float*>& rows, float sink, float scale,
                     int64_t head_dim, std::vector<float>& logits, float* out) {
  logits.resize(rows.size());
  float max_logit = sink;
  for (size_t j = 0; j < rows.size(); ++j) {
    float dot = 0.0f;
    for (int64_t d = 0; d < head_dim; ++d) dot += q[d] * rows[j][d];
    logits[j] = dot * scale;
    max_logit = std::max(max_logit, logits[j]);
  }
  float denom = std::exp(sink - max_logit);
  for (float& l : logits) {
    l = std::exp(l - max_logit);
    denom += l;
  }
  std::fill(out, out + head_dim, 0.0f);
  for (size_t j = 0; j < rows.size(); ++j) {
    const float p = logits[j] / denom;
    for (int64_t d = 0; d < head_dim; ++d) out[d] += p * rows[j][d];
  }
}

}  // namespace

void sparse_attention(const SparseAttentionParams& p) {
  const AttentionCall c(p);
  const int64_t n_heads = c.o.n_heads, head_dim = c.o.head_dim;
#pragma omp parallel if (c.work() > kParallelWork)
  {
    std::vector<const float*> rows;
    std::vector<float> logits;
#pragma omp for schedule(static)
    for (int64_t t = 0; t < c.o.n_tokens; ++t) {
      gather_rows(c.sources, t, head_dim, rows);
      for (int64_t h = 0; h < n_heads; ++h) {
        const int64_t offset = (t * n_heads + h) * head_dim;
        attend_one_head(c.q + offset, rows, c.sinks[h], p.scale, head_dim, logits, c.out + offset);
      }
    }
  }
}

}  // namespace dsv4::kernels::cpu

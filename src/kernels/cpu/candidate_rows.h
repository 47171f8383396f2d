// What both CPU references of sparse_attention (attention.cpp, attention_bf16.cpp) read of a
// call: its operands, and the candidate rows each query attends over.
//
// Dimension letters: Dh head dim.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/contracts.h"

namespace dsv4::kernels::cpu {

// The valid candidate rows of query t, both sources in order.
inline void gather_rows(const CandidateSource (&sources)[2], int64_t t, int64_t head_dim,
                        std::vector<const float*>& rows) {
  rows.clear();
  for (const CandidateSource& src : sources) {
    const int64_t n_visible = src.positions
                                  ? visible_entries(src.positions[t], src.ratio, src.n_candidates)
                                  : src.n_candidates;
    const float* kv = source_rows(src, t);
    const int64_t n_rows = source_n_rows(src, t);
    for (int64_t j = 0; j < n_visible; ++j) {
      const int32_t row = src.indices[t * src.index_stride + j];
      if (row < 0) continue;
      DSV4_CHECK(row < n_rows, "sparse_attention: index %d of %lld rows", row, (long long)n_rows);
      rows.push_back(kv + static_cast<int64_t>(row) * head_dim);
    }
  }
}

// A call's operands, its contract checked.
struct AttentionCall {
  SparseAttentionOperands o;
  CandidateSource sources[2];
  const float* q;
  const float* sinks;
  float* out;

  explicit AttentionCall(const SparseAttentionParams& p)
      : o(sparse_attention_operands(p)),
        sources{o.window, o.extra},
        q(p.q.data_as<const float>()),
        sinks(p.sinks.data_as<const float>()),
        out(p.out.data_as<float>()) {}
  // Multiply-adds of the whole call, against the threshold for threads.
  int64_t work() const {
    return o.n_tokens * o.n_heads * (o.window.n_candidates + o.extra.n_candidates) * o.head_dim;
  }
};

}  // namespace dsv4::kernels::cpu

// The candidate rows a query of sparse_attention attends over, as both CPU references
// (attention.cpp, attention_bf16.cpp) gather them.
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

}  // namespace dsv4::kernels::cpu

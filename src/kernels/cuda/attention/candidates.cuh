// What both sparse-attention kernels (sparse_attention.cu, f32; sparse_attention_bf16.cu, the
// fast profile's tensor-core one) read of a call: the operands, and which kv row each of a
// query's candidates is.
//
// Dimension letters: T tokens, H heads, Dh head dim.
#pragma once

#include <cstdint>

#include "kernels/contracts.h"

namespace dsv4::kernels::cuda {

struct AttentionArgs {
  const float* q;  // [T, H, Dh]
  CandidateSource window, extra;
  const float* sinks;  // [H]
  float scale;
  int64_t n_heads, head_dim;
  float* out;  // [T, H, Dh]
};

// A call's operands, its contract checked (kernels/contracts.h).
inline AttentionArgs attention_args(const SparseAttentionParams& p) {
  const SparseAttentionOperands o = sparse_attention_operands(p);
  return {p.q.data_as<const float>(),
          o.window,
          o.extra,
          p.sinks.data_as<const float>(),
          p.scale,
          o.n_heads,
          o.head_dim,
          p.out.data_as<float>()};
}

// How many of query t's extra candidates it may see: all, or with causal compressed entries
// those whose block is complete at its position (one division a query, not one a candidate).
__device__ inline int64_t visible_extra(const AttentionArgs& a, int64_t t) {
  const CandidateSource& e = a.extra;
  return e.positions == nullptr ? e.n_candidates
                                : visible_entries(e.positions[t], e.ratio, e.n_candidates);
}

// Query t's candidate j (window first) as its list gives it, not yet checked (so a kernel can
// load a later tile's entries before it needs them): −1 also for an extra candidate at or past
// n_extra_visible.
__device__ inline int32_t listed_row(const AttentionArgs& a, int64_t t, int64_t j,
                                     int64_t n_extra_visible) {
  const CandidateSource& src = j < a.window.n_candidates ? a.window : a.extra;
  if (j >= a.window.n_candidates) {
    j -= a.window.n_candidates;
    if (j >= n_extra_visible) return -1;
  }
  return src.indices[t * src.index_stride + j];
}

// The kv row of a listed entry of query t's candidate j, or −1 for "no candidate".
__device__ inline int32_t checked_row(const AttentionArgs& a, int64_t t, int64_t j,
                                      int32_t listed) {
  const CandidateSource& src = j < a.window.n_candidates ? a.window : a.extra;
  if (listed >= source_n_rows(src, t)) __trap();  // the model built the indices: a bug
  return listed < 0 ? -1 : listed;
}

// The kv row of query t's candidate j (window first), or −1 for "no candidate" (index −1, or an
// extra candidate at or past n_extra_visible).
__device__ inline int32_t candidate_row(const AttentionArgs& a, int64_t t, int64_t j,
                                        int64_t n_extra_visible) {
  return checked_row(a, t, j, listed_row(a, t, j, n_extra_visible));
}

}  // namespace dsv4::kernels::cuda

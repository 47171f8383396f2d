// Each op's operand contract (kernels/ops.h), checked by one function that the CPU reference and
// the CUDA implementation both call, so the two can never accept different shapes. A check
// returns what the op needs to know of its operands (row matrices, pointers, dimensions);
// violations are DSV4_CHECK failures naming the op and the operand.
//
// Dimension letters as in ops.h.
#pragma once

#include <cstdint>
#include <string>

#include "base/check.h"
#include "base/tensor.h"
#include "format/fp8_block.h"
#include "kernels/ops.h"
#include "kernels/row_matrix.h"

namespace dsv4::kernels {

// A contiguous f32 vector of n elements (any rank).
inline const float* f32_vector(const TensorView& v, int64_t n, const char* what) {
  DSV4_CHECK(v.dtype == DType::kF32 && v.numel() == n && v.is_contiguous(),
             "%s: expected f32 [%lld]", what, (long long)n);
  return v.data_as<const float>();
}

// ---- Dense ops ----

// A linear's weight: rows of f32, or of bf16 (a device keeps a bf16 checkpoint's linear weights
// in bf16: checkpoint/to_device.h), dense within a row; or e4m3 rows with one f32 scale per
// 128 × 128 block (an FP8 checkpoint's, format/fp8_block.h), whose scales are powers of two (the
// loader keeps FP8 only then), so that every value w = e4m3 · s is exactly a bf16. Every value
// widens exactly to f32.
struct WeightRows {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t n_rows = 0, n_cols = 0, row_stride = 0;  // row_stride in elements
  const float* block_scales = nullptr;             // e4m3: [ceil(n_rows/128), scale_cols] row-major
  int64_t scale_cols = 0;
};
inline WeightRows as_weight_rows(const TensorView& w, const char* what) {
  DSV4_CHECK(w.dtype == DType::kF32 || w.dtype == DType::kBF16, "%s: expected f32 or bf16, got %s",
             what, std::string(dtype_name(w.dtype)).c_str());
  TensorView layout = w;  // as_rows checks rank, shape and strides, which are in elements
  layout.dtype = DType::kF32;
  const RowMatrix m = as_rows(layout, what);
  return {w.data, w.dtype, m.n_rows, m.n_cols, m.row_stride};
}
inline WeightRows as_weight_rows(const format::Fp8BlockView& w, const char* what) {
  DSV4_CHECK(w.values != nullptr && w.block_scales != nullptr && w.n_rows > 0 && w.n_cols > 0 &&
                 w.row_stride >= w.n_cols,
             "%s: an FP8 weight [%lld, %lld] needs values, block scales and row stride >= K", what,
             (long long)w.n_rows, (long long)w.n_cols);
  return {w.values,     DType::kF8E4M3, w.n_rows,      w.n_cols,
          w.row_stride, w.block_scales, w.scale_cols()};
}

struct LinearOperands {
  RowMatrix x;   // [T, K]
  WeightRows w;  // [N, K]
  RowMatrix y;   // [T, N]
};
// W: a TensorView (f32 or bf16) or a format::Fp8BlockView.
template <typename W>
LinearOperands linear_operands(const TensorView& x, const W& w, const TensorView& y) {
  const LinearOperands o{as_rows(x, "linear x"), as_weight_rows(w, "linear w"),
                         as_rows(y, "linear y")};
  DSV4_CHECK(o.x.n_cols == o.w.n_cols, "linear: x has K=%lld, w has K=%lld", (long long)o.x.n_cols,
             (long long)o.w.n_cols);
  DSV4_CHECK(o.y.n_rows == o.x.n_rows && o.y.n_cols == o.w.n_rows,
             "linear: y is [%lld, %lld], expected [%lld, %lld]", (long long)o.y.n_rows,
             (long long)o.y.n_cols, (long long)o.x.n_rows, (long long)o.w.n_rows);
  return o;
}

// linear's operands with x [T, G·K]; returns them with x seen as its first group's columns
// [T, K] (group g starts g·K columns further).
template <typename W>
LinearOperands block_diagonal_operands(const TensorView& x, const W& w, int64_t n_groups,
                                       const TensorView& y) {
  LinearOperands o{as_rows(x, "block_diagonal_linear x"),
                   as_weight_rows(w, "block_diagonal_linear w"),
                   as_rows(y, "block_diagonal_linear y")};
  DSV4_CHECK(n_groups > 0 && o.x.n_cols == n_groups * o.w.n_cols && o.w.n_rows % n_groups == 0,
             "block_diagonal_linear: x [%lld, %lld] and w [%lld, %lld] are not %lld groups",
             (long long)o.x.n_rows, (long long)o.x.n_cols, (long long)o.w.n_rows,
             (long long)o.w.n_cols, (long long)n_groups);
  DSV4_CHECK(o.y.n_rows == o.x.n_rows && o.y.n_cols == o.w.n_rows,
             "block_diagonal_linear: y is [%lld, %lld], expected [%lld, %lld]",
             (long long)o.y.n_rows, (long long)o.y.n_cols, (long long)o.x.n_rows,
             (long long)o.w.n_rows);
  o.x.n_cols = o.w.n_cols;
  return o;
}

// rms_norm's sum of squares (ops.h): lanes of the row, lane j holding the elements j + k·1024.
// Every kernel that norms a row splits it on these lanes (a thread a power-of-two run of
// neighbouring lanes, any number of threads up to 1024), so its tree of additions is the CPU's.
inline constexpr int64_t kRmsNormLanes = 1024;

struct RmsNormOperands {
  RowMatrix x, y;
  const float* weight;  // [D], or nullptr (unweighted)
};
inline RmsNormOperands rms_norm_operands(const TensorView& x, const TensorView& weight,
                                         const TensorView& y) {
  const RmsNormOperands o{as_rows(x, "rms_norm x"), as_rows(y, "rms_norm y"), nullptr};
  DSV4_CHECK(o.x.n_rows == o.y.n_rows && o.x.n_cols == o.y.n_cols, "rms_norm: x and y differ");
  if (weight.data == nullptr) return o;
  return {o.x, o.y, f32_vector(weight, o.x.n_cols, "rms_norm weight")};
}

struct SwigluOperands {
  RowMatrix gate_up, out;  // [T, 2F], [T, F]
};
inline SwigluOperands swiglu_operands(const TensorView& gate_up, const TensorView& out) {
  const SwigluOperands o{as_rows(gate_up, "swiglu gate_up"), as_rows(out, "swiglu out")};
  DSV4_CHECK(o.gate_up.n_rows == o.out.n_rows && o.gate_up.n_cols == 2 * o.out.n_cols,
             "swiglu: gate_up must be [T, 2F]");
  return o;
}

inline void check_add(const TensorView& a, const TensorView& b, const TensorView& y) {
  DSV4_CHECK(a.shape == b.shape && a.shape == y.shape, "add: shapes %s, %s, %s",
             a.shape.to_string().c_str(), b.shape.to_string().c_str(), y.shape.to_string().c_str());
  DSV4_CHECK(a.dtype == DType::kF32 && b.dtype == DType::kF32 && y.dtype == DType::kF32 &&
                 a.is_contiguous() && b.is_contiguous() && y.is_contiguous(),
             "add: f32 contiguous only");
}

// The ids' range is checked where they are read (on the host, or by the kernel).
inline void check_embedding(const TensorView& table, const TensorView& ids, const TensorView& y) {
  DSV4_CHECK(table.rank() == 2 && table.is_contiguous() && y.rank() == 2 && y.is_contiguous() &&
                 y.dtype == table.dtype && y.size(1) == table.size(1),
             "embedding: table [V, D] and y [T, D] of one dtype, contiguous");
  DSV4_CHECK(ids.dtype == DType::kI64 && ids.rank() == 1 && ids.is_contiguous() &&
                 ids.size(0) == y.size(0),
             "embedding: ids must be i64 [T]");
}

// An address table or a positions list of decode rows (or of gathered rows): i64 [n], contiguous.
inline const int64_t* row_table(const TensorView& v, int64_t n, const char* what) {
  DSV4_CHECK(v.dtype == DType::kI64 && v.is_contiguous() && v.numel() == n,
             "%s: expected i64 [%lld]", what, (long long)n);
  return v.data_as<const int64_t>();
}

// gather_rows: y [n, W] contiguous of any dtype, rows i64 [n] its source rows' addresses.
struct GatherRowsOperands {
  const int64_t* rows;
  char* y;
  int64_t n_rows, row_bytes;
};
inline GatherRowsOperands gather_rows_operands(const TensorView& rows, const TensorView& y) {
  DSV4_CHECK(y.rank() == 2 && y.is_contiguous(), "gather_rows: y [n, W] contiguous");
  return {row_table(rows, y.size(0), "gather_rows rows"), static_cast<char*>(y.data), y.size(0),
          y.size(1) * static_cast<int64_t>(dtype_size(y.dtype))};
}

// copy_blocks: three i64 [n] tables, sources, destinations and byte counts.
struct CopyBlocksOperands {
  const int64_t *sources, *destinations, *bytes;
  int64_t n_blocks;
};
inline CopyBlocksOperands copy_blocks_operands(const TensorView& sources,
                                               const TensorView& destinations,
                                               const TensorView& bytes) {
  const int64_t n = sources.numel();
  return {row_table(sources, n, "copy_blocks sources"),
          row_table(destinations, n, "copy_blocks destinations"),
          row_table(bytes, n, "copy_blocks bytes"), n};
}

// ---- Hyper-connections ----

// x [T, D] as rows; out f32 [T, M, D].
inline RowMatrix hc_repeat_input(const TensorView& x, const TensorView& out) {
  const RowMatrix in = as_rows(x, "hc_repeat x");
  DSV4_CHECK(out.dtype == DType::kF32 && out.rank() == 3 && out.is_contiguous() &&
                 out.size(0) == in.n_rows && out.size(2) == in.n_cols,
             "hc_repeat: out must be f32 [T, M, D]");
  return in;
}

// hc_split_sinkhorn's operands: mixes [T, (2+M)·M], pre and post [T, M], comb f32 [T, M, M]
// contiguous, scale [3], base [(2+M)·M].
struct HcSplitOperands {
  RowMatrix mixes, pre, post;
  float* comb;
  const float* scale;
  const float* base;
};
inline HcSplitOperands hc_split_operands(const TensorView& mixes, const TensorView& scale,
                                         const TensorView& base, const HcMix& out) {
  const RowMatrix mix = as_rows(mixes, "hc_split_sinkhorn mixes");
  const RowMatrix pre = as_rows(out.pre, "hc_split_sinkhorn pre");
  const RowMatrix post = as_rows(out.post, "hc_split_sinkhorn post");
  const int64_t m = pre.n_cols;
  DSV4_CHECK(mix.n_cols == (2 + m) * m && pre.n_rows == mix.n_rows && post.n_rows == mix.n_rows &&
                 post.n_cols == m,
             "hc_split_sinkhorn: mixes must be [T, (2+M)·M] with pre, post [T, M]");
  DSV4_CHECK(out.comb.dtype == DType::kF32 && out.comb.is_contiguous() &&
                 out.comb.numel() == mix.n_rows * m * m,
             "hc_split_sinkhorn: comb must be f32 [T, M, M]");
  return {mix,
          pre,
          post,
          out.comb.data_as<float>(),
          f32_vector(scale, 3, "hc_split_sinkhorn scale"),
          f32_vector(base, (2 + m) * m, "hc_split_sinkhorn base")};
}

// hc_collapse's operands: x f32 [T, M, D] contiguous, pre [T, M], y [T, D].
struct HcCollapseOperands {
  const float* streams;
  RowMatrix pre, y;
};
inline HcCollapseOperands hc_collapse_operands(const TensorView& x, const TensorView& pre,
                                               const TensorView& y) {
  const HcCollapseOperands o{x.data_as<const float>(), as_rows(pre, "hc_collapse pre"),
                             as_rows(y, "hc_collapse y")};
  DSV4_CHECK(x.dtype == DType::kF32 && x.is_contiguous() &&
                 x.numel() == o.pre.n_rows * o.pre.n_cols * o.y.n_cols &&
                 o.y.n_rows == o.pre.n_rows,
             "hc_collapse: x must be f32 [T, M, D] contiguous");
  return o;
}

// hc_expand's operands: f [T, D], post [T, M], residual and out f32 [T, M, D] contiguous and
// apart, comb f32 [T, M, M] contiguous; f_addend [T, D] with f's row stride, or nullptr.
struct HcExpandOperands {
  RowMatrix f, post;
  const float* residual;
  const float* comb;
  float* out;
  const float* f_addend;
};
inline HcExpandOperands hc_expand_operands(const TensorView& f, const TensorView& f_addend,
                                           const TensorView& residual, const TensorView& post,
                                           const TensorView& comb, const TensorView& out) {
  const HcExpandOperands o{as_rows(f, "hc_expand f"),
                           as_rows(post, "hc_expand post"),
                           residual.data_as<const float>(),
                           comb.data_as<const float>(),
                           out.data_as<float>(),
                           f_addend.data_as<const float>()};
  if (o.f_addend != nullptr) {
    const RowMatrix addend = as_rows(f_addend, "hc_expand f_addend");
    DSV4_CHECK(addend.n_rows == o.f.n_rows && addend.n_cols == o.f.n_cols &&
                   addend.row_stride == o.f.row_stride,
               "hc_expand: f_addend must be f32 [T, D] with f's rows");
  }
  const int64_t n_tokens = o.f.n_rows, m = o.post.n_cols, n = n_tokens * m * o.f.n_cols;
  DSV4_CHECK(o.post.n_rows == n_tokens && residual.dtype == DType::kF32 &&
                 residual.is_contiguous() && residual.numel() == n && out.dtype == DType::kF32 &&
                 out.is_contiguous() && out.numel() == n && comb.dtype == DType::kF32 &&
                 comb.is_contiguous() && comb.numel() == n_tokens * m * m,
             "hc_expand: residual, out must be f32 [T, M, D], comb [T, M, M]");
  DSV4_CHECK(out.data != residual.data, "hc_expand: out aliases residual");
  return o;
}

// ---- Attention ----

// rope's x f32 [T, .., Dh] (contiguous; H heads of Dh, or one), positions i64 [T], inv_freq f32
// [P] with 2P ≤ Dh.
struct RopeOperands {
  float* x;
  const int64_t* positions;
  const float* inv_freq;
  int64_t n_tokens, n_heads, head_dim, n_pairs;
};
inline RopeOperands rope_operands(const TensorView& x, const TensorView& positions,
                                  const TensorView& inv_freq) {
  DSV4_CHECK(x.dtype == DType::kF32 && x.is_contiguous() && x.rank() >= 2,
             "rope: x f32 [T, .., Dh]");
  DSV4_CHECK(
      positions.dtype == DType::kI64 && positions.is_contiguous() && positions.numel() == x.size(0),
      "rope: positions i64 [T]");
  DSV4_CHECK(inv_freq.dtype == DType::kF32 && inv_freq.rank() == 1 && inv_freq.is_contiguous(),
             "rope: inv_freq f32 [P]");
  const int64_t n_tokens = x.size(0), head_dim = x.size(-1), n_pairs = inv_freq.size(0);
  DSV4_CHECK(2 * n_pairs <= head_dim, "rope: %lld pairs in a head of %lld", (long long)n_pairs,
             (long long)head_dim);
  const int64_t n_heads = x.numel() == 0 ? 0 : x.numel() / (n_tokens * head_dim);
  return {x.data_as<float>(),
          positions.data_as<const int64_t>(),
          inv_freq.data_as<const float>(),
          n_tokens,
          n_heads,
          head_dim,
          n_pairs};
}

// One candidate source of sparse_attention: rows of `kv` picked by `indices` (−1 = none).
struct CandidateSource {
  const float* kv = nullptr;
  int64_t n_rows = 0;
  const int32_t* indices = nullptr;
  int64_t n_candidates = 0;  // per query
  int64_t index_stride = 0;  // between queries' lists: n_candidates, or 0 (one list for all)
  // Causal compressed entries: query t sees candidates j < (positions[t] + 1) / ratio.
  const int64_t* positions = nullptr;
  int64_t ratio = 0;
  // Per-row sources: query t's rows at addresses[t]; with row_positions, it holds
  // (row_positions[t] + 1) / ratio of them (else n_rows).
  const int64_t* addresses = nullptr;
  const int64_t* row_positions = nullptr;
};

// Query t's rows of a source, and how many there are.
DSV4_HOST_DEVICE inline const float* source_rows(const CandidateSource& s, int64_t t) {
  return s.addresses ? reinterpret_cast<const float*>(s.addresses[t]) : s.kv;
}
DSV4_HOST_DEVICE inline int64_t source_n_rows(const CandidateSource& s, int64_t t) {
  return s.row_positions ? (s.row_positions[t] + 1) / s.ratio : s.n_rows;
}

struct SparseAttentionOperands {
  int64_t n_tokens, n_heads, head_dim;
  CandidateSource window, extra;  // extra is empty when p.extra_kv is
};
inline CandidateSource candidate_source(const TensorView& kv, const TensorView& indices,
                                        int64_t n_tokens, int64_t head_dim, const char* what) {
  if (kv.data == nullptr) return {};
  DSV4_CHECK(
      kv.dtype == DType::kF32 && kv.is_contiguous() && kv.rank() == 2 && kv.size(1) == head_dim,
      "sparse_attention %s: kv f32 [N, %lld]", what, (long long)head_dim);
  DSV4_CHECK(indices.dtype == DType::kI32 && indices.is_contiguous() && indices.rank() == 2 &&
                 (indices.size(0) == n_tokens || indices.size(0) == 1),
             "sparse_attention %s: indices i32 [%lld or 1, K]", what, (long long)n_tokens);
  return {kv.data_as<const float>(), kv.size(0), indices.data_as<const int32_t>(), indices.size(1),
          indices.size(0) == 1 ? 0 : indices.size(1)};
}
inline SparseAttentionOperands sparse_attention_operands(const SparseAttentionParams& p) {
  DSV4_CHECK(p.q.dtype == DType::kF32 && p.q.is_contiguous() && p.q.rank() == 3,
             "sparse_attention: q f32 [T, H, Dh]");
  DSV4_CHECK(p.out.dtype == DType::kF32 && p.out.is_contiguous() && p.out.shape == p.q.shape,
             "sparse_attention: out must match q");
  const int64_t n_tokens = p.q.size(0), n_heads = p.q.size(1), head_dim = p.q.size(2);
  f32_vector(p.sinks, n_heads, "sparse_attention sinks");
  SparseAttentionOperands o{
      n_tokens, n_heads, head_dim, candidate_source(p.kv, p.indices, n_tokens, head_dim, "window"),
      candidate_source(p.extra_kv, p.extra_indices, n_tokens, head_dim, "extra")};
  if (p.extra_positions.data != nullptr) {
    DSV4_CHECK(o.extra.kv != nullptr && p.extra_ratio >= 1 &&
                   p.extra_positions.dtype == DType::kI64 && p.extra_positions.is_contiguous() &&
                   p.extra_positions.numel() == n_tokens,
               "sparse_attention: extra_positions i64 [%lld] with an extra source and a ratio "
               "≥ 1 (%lld)",
               (long long)n_tokens, (long long)p.extra_ratio);
    o.extra.positions = p.extra_positions.data_as<const int64_t>();
    o.extra.ratio = p.extra_ratio;
  }
  if (p.kv_addresses.data != nullptr) {
    o.window.addresses = row_table(p.kv_addresses, n_tokens, "sparse_attention kv_addresses");
  }
  DSV4_CHECK((p.extra_addresses.data != nullptr) ==
                 (o.extra.kv != nullptr && o.window.addresses != nullptr),
             "sparse_attention: extra_addresses go with kv_addresses and an extra source");
  if (p.extra_addresses.data != nullptr) {
    DSV4_CHECK(p.extra_ratio >= 1, "sparse_attention: per-row extra rows need a ratio ≥ 1");
    o.extra.addresses = row_table(p.extra_addresses, n_tokens, "sparse_attention extra_addresses");
    o.extra.row_positions = row_table(p.row_positions, n_tokens, "sparse_attention row_positions");
    o.extra.ratio = p.extra_ratio;
  }
  return o;
}

// The fast profile's attention (sparse_attention_bf16): head dims it pads to its 512.
inline void check_fast_attention_head_dim(int64_t head_dim) {
  DSV4_CHECK(head_dim % 4 == 0 && head_dim <= 512,
             "sparse_attention_bf16: head dim %lld, expected a multiple of 4 up to 512",
             (long long)head_dim);
}

struct CompressorPoolDims {
  int64_t width;     // d, the entry width
  int64_t n_halves;  // c: 2 with overlap (CSA), else 1
  int64_t ratio;     // m
  int64_t n_rows;    // S
  int64_t n_entries;
};
inline CompressorPoolDims compressor_pool_dims(const CompressorPoolParams& p) {
  const CompressorPoolDims d{p.out.size(-1), p.overlap ? 2 : 1, p.ape.size(0), p.kv.size(0),
                             p.out.size(0)};
  DSV4_CHECK(p.kv.dtype == DType::kF32 && p.kv.is_contiguous() && p.kv.rank() == 2 &&
                 p.kv.size(1) == d.n_halves * d.width,
             "compressor_pool: kv f32 [S, %lld]", (long long)(d.n_halves * d.width));
  DSV4_CHECK(p.gate.dtype == DType::kF32 && p.gate.is_contiguous() && p.gate.shape == p.kv.shape,
             "compressor_pool: gate must match kv");
  DSV4_CHECK(p.ape.dtype == DType::kF32 && p.ape.is_contiguous() && p.ape.rank() == 2 &&
                 p.ape.size(1) == d.n_halves * d.width,
             "compressor_pool: ape f32 [m, c·d]");
  DSV4_CHECK(p.out.dtype == DType::kF32 && p.out.is_contiguous() && p.out.rank() == 2,
             "compressor_pool: out f32 [n, d]");
  DSV4_CHECK((d.n_entries + d.n_halves - 1) * d.ratio <= d.n_rows,
             "compressor_pool: %lld rows for %lld entries", (long long)d.n_rows,
             (long long)d.n_entries);
  return d;
}

struct IndexerDims {
  int64_t n_tokens, n_heads, head_dim, n_entries;
  const int64_t* key_addresses;  // per-row keys (decode rows), or null
  const int64_t* key_positions;
  int64_t key_ratio;
};

// Row t's keys and how many it scores.
DSV4_HOST_DEVICE inline const float* row_keys(const IndexerDims& d, const float* keys, int64_t t) {
  return d.key_addresses ? reinterpret_cast<const float*>(d.key_addresses[t]) : keys;
}
DSV4_HOST_DEVICE inline int64_t row_n_keys(const IndexerDims& d, int64_t t) {
  return d.key_addresses ? visible_entries(d.key_positions[t], d.key_ratio, d.n_entries)
                         : d.n_entries;
}
inline IndexerDims indexer_dims(const IndexerScoreParams& p) {
  DSV4_CHECK(p.q.dtype == DType::kF32 && p.q.is_contiguous() && p.q.rank() == 3,
             "indexer_scores: q f32 [T, HI, DI]");
  IndexerDims d{p.q.size(0), p.q.size(1), p.q.size(2), p.keys.size(0), nullptr, nullptr, 0};
  if (p.key_addresses.data != nullptr) {
    DSV4_CHECK(p.key_ratio >= 1, "indexer_scores: per-row keys need a ratio ≥ 1");
    d.key_addresses = row_table(p.key_addresses, d.n_tokens, "indexer_scores key_addresses");
    d.key_positions = row_table(p.key_positions, d.n_tokens, "indexer_scores key_positions");
    d.key_ratio = p.key_ratio;
  }
  DSV4_CHECK(p.keys.dtype == DType::kF32 && p.keys.is_contiguous() && p.keys.rank() == 2 &&
                 p.keys.size(1) == d.head_dim,
             "indexer_scores: keys f32 [N, DI]");
  DSV4_CHECK(p.weights.dtype == DType::kF32 && p.weights.is_contiguous() &&
                 p.weights.numel() == d.n_tokens * d.n_heads,
             "indexer_scores: weights f32 [T, HI]");
  DSV4_CHECK(p.scores.dtype == DType::kF32 && p.scores.is_contiguous() && p.scores.rank() == 2 &&
                 p.scores.size(0) == d.n_tokens && p.scores.size(1) == d.n_entries,
             "indexer_scores: scores f32 [T, N]");
  return d;
}

// The fast profile's indexer (indexer_scores_fp8): one quantization group a row of DI ≤ 128.
inline IndexerDims indexer_fp8_dims(const IndexerScoreParams& p) {
  const IndexerDims d = indexer_dims(p);
  DSV4_CHECK(d.head_dim % 4 == 0 && d.head_dim <= 128,
             "indexer_scores_fp8: head dim %lld, expected a multiple of 4 up to 128",
             (long long)d.head_dim);
  return d;
}

// ---- Decode rows' cache writes ----

struct WindowWriteOperands {
  const float* rows;
  const int64_t* rings;
  const int64_t* positions;
  int64_t n_rows, width, n_ring_rows;
};
inline WindowWriteOperands window_write_operands(const TensorView& rows, const TensorView& rings,
                                                 int64_t n_ring_rows, const TensorView& positions) {
  DSV4_CHECK(rows.dtype == DType::kF32 && rows.rank() == 2 && rows.is_contiguous(),
             "window_write: rows f32 [T, Dh]");
  DSV4_CHECK(n_ring_rows >= 1, "window_write: a ring of %lld rows", (long long)n_ring_rows);
  const int64_t n = rows.size(0);
  return {rows.data_as<const float>(),
          row_table(rings, n, "window_write rings"),
          row_table(positions, n, "window_write positions"),
          n,
          rows.size(1),
          n_ring_rows};
}

struct CompressorDecodeOperands {
  const float *kv, *gate;
  const int64_t *kv_rows, *gate_rows, *entries, *positions;
  const float *ape, *norm_weight, *inv_freq;
  const int64_t *kv_journal, *gate_journal;  // null: no journals
  int64_t n_rows;  // T
  int64_t width;   // d
  int64_t n_halves, ratio, n_pairs;
  float eps;
};
inline CompressorDecodeOperands compressor_decode_operands(const CompressorDecodeParams& p) {
  DSV4_CHECK(p.kv.dtype == DType::kF32 && p.kv.rank() == 2 && p.kv.is_contiguous(),
             "compressor_decode: kv f32 [T, c·d]");
  DSV4_CHECK(p.gate.dtype == DType::kF32 && p.gate.is_contiguous() && p.gate.shape == p.kv.shape,
             "compressor_decode: gate must match kv");
  const int64_t n = p.kv.size(0), n_halves = p.overlap ? 2 : 1;
  DSV4_CHECK(p.kv.size(1) % n_halves == 0, "compressor_decode: rows of %lld for %lld halves",
             (long long)p.kv.size(1), (long long)n_halves);
  const int64_t width = p.kv.size(1) / n_halves;
  DSV4_CHECK(p.ape.dtype == DType::kF32 && p.ape.is_contiguous() && p.ape.rank() == 2 &&
                 p.ape.size(0) >= 1 && p.ape.size(1) == p.kv.size(1),
             "compressor_decode: ape f32 [m, c·d]");
  DSV4_CHECK(p.inv_freq.dtype == DType::kF32 && p.inv_freq.rank() == 1 &&
                 p.inv_freq.is_contiguous() && 2 * p.inv_freq.size(0) <= width,
             "compressor_decode: inv_freq f32 [P], 2P ≤ d");
  const bool journals = p.kv_journal.data != nullptr;
  DSV4_CHECK(journals == (p.gate_journal.data != nullptr),
             "compressor_decode: kv_journal and gate_journal go together");
  return {p.kv.data_as<const float>(),
          p.gate.data_as<const float>(),
          row_table(p.kv_rows, n, "compressor_decode kv_rows"),
          row_table(p.gate_rows, n, "compressor_decode gate_rows"),
          row_table(p.entries, n, "compressor_decode entries"),
          row_table(p.positions, n, "compressor_decode positions"),
          p.ape.data_as<const float>(),
          f32_vector(p.norm_weight, width, "compressor_decode norm_weight"),
          p.inv_freq.data_as<const float>(),
          journals ? row_table(p.kv_journal, n, "compressor_decode kv_journal") : nullptr,
          journals ? row_table(p.gate_journal, n, "compressor_decode gate_journal") : nullptr,
          n,
          width,
          n_halves,
          p.ape.size(0),
          p.inv_freq.size(0),
          p.eps};
}

// ---- Expert offload's copy ----

// copy_touched_experts' regions: w13's codes and block scales, then w2's, each [E, one expert's
// bytes].
inline constexpr int kExpertBulkRegions = 4;
struct TouchedExpertsOperands {
  const int32_t* active = nullptr;  // [E+2], the count at [E+1]
  int64_t n_experts = 0;            // E
  const uint8_t* from[kExpertBulkRegions] = {};
  uint8_t* to[kExpertBulkRegions] = {};
  int64_t expert_bytes[kExpertBulkRegions] = {};  // one expert's slice of each region
};
inline TouchedExpertsOperands touched_experts_operands(const TensorView& active,
                                                       const ExpertBulkCopies& from,
                                                       const ExpertBulkCopies& to) {
  const TensorView* sources[kExpertBulkRegions] = {&from.w13_packed, &from.w13_block_scale,
                                                   &from.w2_packed, &from.w2_block_scale};
  const TensorView* targets[kExpertBulkRegions] = {&to.w13_packed, &to.w13_block_scale,
                                                   &to.w2_packed, &to.w2_block_scale};
  TouchedExpertsOperands op;
  op.n_experts = from.w13_packed.rank() >= 1 ? from.w13_packed.size(0) : 0;
  DSV4_CHECK(op.n_experts > 0, "copy_touched_experts: from holds no experts");
  DSV4_CHECK(
      active.dtype == DType::kI32 && active.numel() == op.n_experts + 2 && active.is_contiguous(),
      "copy_touched_experts: active must be i32 [E+2], E = %lld", (long long)op.n_experts);
  op.active = active.data_as<const int32_t>();
  for (int r = 0; r < kExpertBulkRegions; ++r) {
    const TensorView &a = *sources[r], &b = *targets[r];
    DSV4_CHECK(a.rank() >= 1 && a.size(0) == op.n_experts && b.shape == a.shape &&
                   b.dtype == a.dtype && a.is_contiguous() && b.is_contiguous(),
               "copy_touched_experts: region %d is %s into %s, needs E = %lld experts, the same "
               "contiguous shape on both sides",
               r, a.shape.to_string().c_str(), b.shape.to_string().c_str(),
               (long long)op.n_experts);
    op.expert_bytes[r] = static_cast<int64_t>(a.bytes()) / op.n_experts;
    DSV4_CHECK(op.expert_bytes[r] % 16 == 0 && reinterpret_cast<uintptr_t>(a.data) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(b.data) % 16 == 0,
               "copy_touched_experts: region %d needs 16-byte aligned data and expert slices of "
               "16-byte multiples (%lld bytes)",
               r, (long long)op.expert_bytes[r]);
    op.from[r] = static_cast<const uint8_t*>(a.data);
    op.to[r] = static_cast<uint8_t*>(b.data);
  }
  return op;
}

}  // namespace dsv4::kernels

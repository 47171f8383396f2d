// The FP8 linear's operand contract (kernels/ops.h, "FP8"), checked by one function each that
// the CPU reference and the CUDA implementation both call, as contracts.h does for the other
// ops. Violations are DSV4_CHECK failures naming the op and the operand.
//
// Dimension letters: T tokens, N output features, K input features, Kb = ceil(K/128),
// Nb = ceil(N/128), G groups of R outputs.
#pragma once

#include <cstdint>

#include "base/check.h"
#include "base/tensor.h"
#include "format/fp8_block.h"
#include "kernels/contracts.h"
#include "kernels/ops.h"
#include "kernels/row_matrix.h"

namespace dsv4::kernels {

inline int64_t fp8_groups(int64_t n_cols) {
  return (n_cols + format::kFp8ActivationGroup - 1) / format::kFp8ActivationGroup;
}

// An Fp8Activation as raw pointers: codes [T, K] and scales [T, Kb], both dense.
struct Fp8Rows {
  const uint8_t* values = nullptr;
  const float* scales = nullptr;
  int64_t n_rows = 0;  // T
  int64_t n_cols = 0;  // K
};

inline Fp8Rows fp8_activation_rows(const Fp8Activation& a, const char* what) {
  DSV4_CHECK(a.values.dtype == DType::kF8E4M3 && a.values.rank() == 2 && a.values.is_contiguous(),
             "%s: values must be f8_e4m3 [T, K], contiguous", what);
  const int64_t n_rows = a.values.size(0), n_cols = a.values.size(1);
  DSV4_CHECK(a.scales.dtype == DType::kF32 && a.scales.is_contiguous() &&
                 a.scales.shape == Shape({n_rows, fp8_groups(n_cols)}),
             "%s: scales must be f32 [%lld, %lld], contiguous, got %s", what, (long long)n_rows,
             (long long)fp8_groups(n_cols), a.scales.shape.to_string().c_str());
  DSV4_CHECK(a.values.device == a.scales.device, "%s: values and scales on different devices",
             what);
  return {a.values.data_as<const uint8_t>(), a.scales.data_as<const float>(), n_rows, n_cols};
}

// quantize_activation_fp8: x f32 [T, K] rows, out shaped for it.
struct Fp8QuantizeOperands {
  RowMatrix x;
  Fp8Rows out;
};
inline Fp8QuantizeOperands fp8_quantize_operands(const TensorView& x, const Fp8Activation& out) {
  const Fp8QuantizeOperands o{as_rows(x, "quantize_activation_fp8 x"),
                              fp8_activation_rows(out, "quantize_activation_fp8 out")};
  DSV4_CHECK(o.out.n_rows == o.x.n_rows && o.out.n_cols == o.x.n_cols,
             "quantize_activation_fp8: x is [%lld, %lld], out [%lld, %lld]", (long long)o.x.n_rows,
             (long long)o.x.n_cols, (long long)o.out.n_rows, (long long)o.out.n_cols);
  return o;
}

// sparse_attention_bf16's FP8 output (SparseAttentionParams::out_fp8), checked: whether the
// call asks for it, and then the inverse RoPE's and the quantizer's operands over its out rows
// [T, H·Dh] (a head's groups of 128 columns its own: head dims a multiple of 128).
struct AttentionFp8Out {
  bool wanted = false;
  RopeOperands rope{};
  Fp8Rows out{};
};
inline AttentionFp8Out attention_fp8_out(const SparseAttentionParams& p) {
  if (p.out_fp8.values.data == nullptr) return {};
  const RopeOperands rope = rope_operands(p.out, p.rope_positions, p.rope_inv_freq);
  DSV4_CHECK(rope.head_dim % format::kFp8ActivationGroup == 0 &&
                 (rope.head_dim - 2 * rope.n_pairs) % 2 == 0,
             "sparse_attention_bf16 out_fp8: head dim %lld with %lld pairs, expected a multiple "
             "of %lld whose pairs start at an even dim",
             (long long)rope.head_dim, (long long)rope.n_pairs,
             (long long)format::kFp8ActivationGroup);
  const int64_t n_cols = rope.n_heads * rope.head_dim;
  const Fp8Rows out = fp8_activation_rows(p.out_fp8, "sparse_attention_bf16 out_fp8");
  DSV4_CHECK(out.n_rows == rope.n_tokens && out.n_cols == n_cols,
             "sparse_attention_bf16 out_fp8: [%lld, %lld] for out rows [%lld, %lld]",
             (long long)out.n_rows, (long long)out.n_cols, (long long)rope.n_tokens,
             (long long)n_cols);
  return {true, rope, out};
}

// An FP8 weight's values exist and its rows hold K columns.
inline void check_fp8_weight(const format::Fp8BlockView& w, const char* what) {
  DSV4_CHECK(w.values != nullptr || w.n_rows * w.n_cols == 0, "%s: w has no values", what);
  DSV4_CHECK(w.row_stride >= w.n_cols, "%s: w row stride %lld under K %lld", what,
             (long long)w.row_stride, (long long)w.n_cols);
}

// linear_fp8: a [T, K], w [N, K] with f32 block scales [Nb, Kb], y f32 [T, N] rows.
struct Fp8LinearOperands {
  Fp8Rows a;
  format::Fp8BlockView w;
  RowMatrix y;
};
inline Fp8LinearOperands fp8_linear_operands(const Fp8Activation& a, const format::Fp8BlockView& w,
                                             const TensorView& y) {
  const Fp8LinearOperands o{fp8_activation_rows(a, "linear_fp8 a"), w, as_rows(y, "linear_fp8 y")};
  check_fp8_weight(w, "linear_fp8");
  DSV4_CHECK(w.n_cols == o.a.n_cols, "linear_fp8: a has K=%lld, w has K=%lld",
             (long long)o.a.n_cols, (long long)w.n_cols);
  DSV4_CHECK(o.y.n_rows == o.a.n_rows && o.y.n_cols == w.n_rows,
             "linear_fp8: y is [%lld, %lld], expected [%lld, %lld]", (long long)o.y.n_rows,
             (long long)o.y.n_cols, (long long)o.a.n_rows, (long long)w.n_rows);
  return o;
}

// block_diagonal_linear_fp8: a [T, G·K], w [G·R, K], y f32 [T, G·R] rows, G ≥ 1, and K and R
// multiples of 128, so each group's columns are whole activation groups and its rows whole
// weight blocks (V4's wo_a: K 4096, R 1024).
inline Fp8LinearOperands fp8_block_diagonal_operands(const Fp8Activation& a,
                                                     const format::Fp8BlockView& w,
                                                     int64_t n_groups, const TensorView& y) {
  const char* what = "block_diagonal_linear_fp8";
  const Fp8LinearOperands o{fp8_activation_rows(a, what), w, as_rows(y, what)};
  DSV4_CHECK(n_groups >= 1 && w.n_rows % n_groups == 0, "%s: %lld rows in %lld groups", what,
             (long long)w.n_rows, (long long)n_groups);
  check_fp8_weight(w, what);
  DSV4_CHECK(w.n_cols % format::kFp8ActivationGroup == 0 &&
                 (w.n_rows / n_groups) % format::kFp8WeightBlock == 0,
             "%s: K %lld and R %lld must be multiples of 128", what, (long long)w.n_cols,
             (long long)(w.n_rows / n_groups));
  DSV4_CHECK(o.a.n_cols == n_groups * w.n_cols, "%s: a has %lld columns, expected %lld × %lld",
             what, (long long)o.a.n_cols, (long long)n_groups, (long long)w.n_cols);
  DSV4_CHECK(o.y.n_rows == o.a.n_rows && o.y.n_cols == w.n_rows,
             "%s: y is [%lld, %lld], expected [%lld, %lld]", what, (long long)o.y.n_rows,
             (long long)o.y.n_cols, (long long)o.a.n_rows, (long long)w.n_rows);
  return o;
}

}  // namespace dsv4::kernels

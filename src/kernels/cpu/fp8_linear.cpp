// The FP8 linear, CPU reference (kernels/ops.h, "FP8"): the activation quantizer of V4's
// act_quant (ue8m0 scales) and the block-scaled GEMM with DeepGEMM's accumulation, written as
// plain loops so that every rounding the contract names happens where it says: each 128-column
// partial sum of exact e4m3 products in f32, column by column, then promoted with one f32
// multiply of the two scales and one fused multiply-add, block by block.
//
// Dimension letters: T tokens, N output features, K input features, Kb = ceil(K/128), G groups.
#include <algorithm>
#include <cmath>
#include <vector>

#include "base/float_convert.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/fp8_operands.h"
#include "kernels/fp8_scale.h"

namespace dsv4::kernels::cpu {
namespace {

using format::kFp8ActivationGroup;
using format::kFp8WeightBlock;

// The 256 values an e4m3 byte can hold, decoded once.
const std::vector<float>& e4m3_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(256);
    for (int b = 0; b < 256; ++b) t[b] = e4m3_to_float(static_cast<uint8_t>(b));
    return t;
  }();
  return table;
}

// y[t, n] for n in [n_begin, n_end) = a's columns [a_column, a_column + K) · w's row n, K =
// w.n_cols (a_column a multiple of 128, so those columns' scales are a's [a_column / 128, …)).
void fp8_gemm_rows(const Fp8Rows& a, int64_t a_column, const format::Fp8BlockView& w,
                   int64_t n_begin, int64_t n_end, const RowMatrix& y) {
  const int64_t n_cols = w.n_cols, n_groups = fp8_groups(n_cols);
  const int64_t a_groups = fp8_groups(a.n_cols), a_group0 = a_column / kFp8ActivationGroup;
  const std::vector<float>& e4m3 = e4m3_table();
  // The weight's rows decoded to their codes' values (no scale), so the inner loop is a plain dot.
  std::vector<float> w_codes(static_cast<size_t>((n_end - n_begin) * n_cols));
  for (int64_t n = n_begin; n < n_end; ++n) {
    for (int64_t k = 0; k < n_cols; ++k)
      w_codes[(n - n_begin) * n_cols + k] = e4m3[w.values[n * w.row_stride + k]];
  }
#pragma omp parallel for if (a.n_rows * (n_end - n_begin) * n_cols > kParallelWork)
  for (int64_t t = 0; t < a.n_rows; ++t) {
    std::vector<float> a_codes(static_cast<size_t>(n_cols));
    for (int64_t k = 0; k < n_cols; ++k) a_codes[k] = e4m3[a.values[t * a.n_cols + a_column + k]];
    const float* a_scales = a.scales + t * a_groups + a_group0;
    for (int64_t n = n_begin; n < n_end; ++n) {
      const float* w_row = w_codes.data() + (n - n_begin) * n_cols;
      const float* w_scales = w.block_scales + (n / kFp8WeightBlock) * w.scale_cols();
      float acc = 0.0f;
      for (int64_t j = 0; j < n_groups; ++j) {
        const int64_t k0 = j * kFp8ActivationGroup;
        const int64_t k1 = std::min(n_cols, k0 + kFp8ActivationGroup);
        float partial = 0.0f;
        for (int64_t k = k0; k < k1; ++k) partial += a_codes[k] * w_row[k];
        acc = std::fma(a_scales[j] * w_scales[j], partial, acc);
      }
      y.row(t)[n] = acc;
    }
  }
}

}  // namespace

void quantize_activation_fp8(const TensorView& x, const Fp8Activation& out) {
  const Fp8QuantizeOperands o = fp8_quantize_operands(x, out);
  const int64_t n_groups = fp8_groups(o.x.n_cols);
  auto* values = const_cast<uint8_t*>(o.out.values);
  auto* scales = const_cast<float*>(o.out.scales);
#pragma omp parallel for if (o.x.n_rows * o.x.n_cols > kParallelWork)
  for (int64_t t = 0; t < o.x.n_rows; ++t) {
    const float* row = o.x.row(t);
    for (int64_t j = 0; j < n_groups; ++j) {
      const int64_t k0 = j * kFp8ActivationGroup;
      const int64_t k1 = std::min(o.x.n_cols, k0 + kFp8ActivationGroup);
      float amax = 0.0f;
      for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(row[k]));
      const float scale = fp8_activation_scale(amax);
      scales[t * n_groups + j] = scale;
      for (int64_t k = k0; k < k1; ++k) values[t * o.x.n_cols + k] = float_to_e4m3(row[k] / scale);
    }
  }
}

void linear_fp8(const Fp8Activation& a, const format::Fp8BlockView& w, const TensorView& y) {
  const Fp8LinearOperands o = fp8_linear_operands(a, w, y);
  fp8_gemm_rows(o.a, 0, w, 0, w.n_rows, o.y);
}

void block_diagonal_linear_fp8(const Fp8Activation& a, const format::Fp8BlockView& w,
                               int64_t n_groups, const TensorView& y) {
  const Fp8LinearOperands o = fp8_block_diagonal_operands(a, w, n_groups, y);
  const int64_t n_group_rows = w.n_rows / n_groups;
  for (int64_t g = 0; g < n_groups; ++g) {
    fp8_gemm_rows(o.a, g * w.n_cols, w, g * n_group_rows, (g + 1) * n_group_rows, o.y);
  }
}

}  // namespace dsv4::kernels::cpu

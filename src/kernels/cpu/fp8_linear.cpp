// The FP8 linear, CPU reference (kernels/ops.h, "FP8"): the activation quantizer of V4's
// act_quant (ue8m0 scales) and the block-scaled GEMM with DeepGEMM's accumulation, written as
// plain loops so that every rounding the contract names happens where it says: each 128-column
// partial sum of exact e4m3 products in f32, column by column, then promoted with one f32
// multiply of the two scales and one fused multiply-add, block by block.
//
// Dimension letters: T tokens, N output features, K input features, Kb = ceil(K/128).
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
  const int64_t n_cols = o.a.n_cols, n_groups = fp8_groups(n_cols);
  const std::vector<float>& e4m3 = e4m3_table();
  // The weight decoded to its codes' values (no scale), so the inner loop is a plain dot.
  std::vector<float> w_codes(static_cast<size_t>(w.n_rows * n_cols));
  for (int64_t n = 0; n < w.n_rows; ++n) {
    for (int64_t k = 0; k < n_cols; ++k)
      w_codes[n * n_cols + k] = e4m3[w.values[n * w.row_stride + k]];
  }
#pragma omp parallel for if (o.a.n_rows * w.n_rows * n_cols > kParallelWork)
  for (int64_t t = 0; t < o.a.n_rows; ++t) {
    std::vector<float> a_codes(static_cast<size_t>(n_cols));
    for (int64_t k = 0; k < n_cols; ++k) a_codes[k] = e4m3[o.a.values[t * n_cols + k]];
    const float* a_scales = o.a.scales + t * n_groups;
    for (int64_t n = 0; n < w.n_rows; ++n) {
      const float* w_row = w_codes.data() + n * n_cols;
      const float* w_scales = w.block_scales + (n / kFp8WeightBlock) * w.scale_cols();
      float acc = 0.0f;
      for (int64_t j = 0; j < n_groups; ++j) {
        const int64_t k0 = j * kFp8ActivationGroup;
        const int64_t k1 = std::min(n_cols, k0 + kFp8ActivationGroup);
        float partial = 0.0f;
        for (int64_t k = k0; k < k1; ++k) partial += a_codes[k] * w_row[k];
        acc = std::fma(a_scales[j] * w_scales[j], partial, acc);
      }
      o.y.row(t)[n] = acc;
    }
  }
}

}  // namespace dsv4::kernels::cpu

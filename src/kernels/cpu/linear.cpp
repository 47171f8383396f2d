// y[T, N] = x[T, K] · w[N, K]ᵀ through OpenBLAS (f32 accumulation), row by row so that a row's
// result never depends on the batch it came in (row_gemm.h). A bf16 weight (only a device keeps
// one, checkpoint/to_device.h; the tests hand one here) is widened to f32 first, exactly, and an
// FP8 one decoded (e4m3 · block scale, as the loader decodes it: checkpoint/decode.cpp).
#include <vector>

#include "base/float_convert.h"
#include "kernels/contracts.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/row_gemm.h"

namespace dsv4::kernels::cpu {
namespace {

// The weight as f32 rows: itself, or its widening into `widened`.
RowMatrix f32_weight(const WeightRows& w, std::vector<float>& widened) {
  if (w.dtype == DType::kF32) {
    return {static_cast<float*>(const_cast<void*>(w.data)), w.n_rows, w.n_cols, w.row_stride};
  }
  widened.resize(static_cast<size_t>(w.n_rows * w.n_cols));
  for (int64_t r = 0; r < w.n_rows; ++r) {
    float* out = widened.data() + r * w.n_cols;
    if (w.dtype == DType::kBF16) {
      const auto* bits = static_cast<const uint16_t*>(w.data) + r * w.row_stride;
      for (int64_t k = 0; k < w.n_cols; ++k) out[k] = bf16_to_float(bits[k]);
    } else {
      const auto* codes = static_cast<const uint8_t*>(w.data) + r * w.row_stride;
      const float* scales = w.block_scales + r / format::kFp8WeightBlock * w.scale_cols;
      for (int64_t k = 0; k < w.n_cols; ++k) {
        out[k] = e4m3_to_float(codes[k]) * scales[k / format::kFp8WeightBlock];
      }
    }
  }
  return {widened.data(), w.n_rows, w.n_cols, w.n_cols};
}

// Outputs [n0, n0 + n) of y from x's columns [k0, k0 + K) and w's rows [n0, n0 + n).
void linear_block(const RowMatrix& x, int64_t k0, const RowMatrix& w, int64_t n0, int64_t n,
                  const RowMatrix& y) {
  rows_times_transposed(x.data + k0, x.row_stride, x.n_rows, w.data + n0 * w.row_stride,
                        w.row_stride, n, w.n_cols, y.data + n0, y.row_stride);
}

void run_linear(const LinearOperands& o) {
  std::vector<float> widened;
  linear_block(o.x, 0, f32_weight(o.w, widened), 0, o.w.n_rows, o.y);
}

void run_block_diagonal(const LinearOperands& o, int64_t n_groups) {
  std::vector<float> widened;
  const RowMatrix w32 = f32_weight(o.w, widened);
  const int64_t rows = o.w.n_rows / n_groups;
  for (int64_t g = 0; g < n_groups; ++g) {
    linear_block(o.x, g * o.x.n_cols, w32, g * rows, rows, o.y);
  }
}

}  // namespace

void linear(const TensorView& x, const TensorView& w, const TensorView& y) {
  run_linear(linear_operands(x, w, y));
}

void linear(const TensorView& x, const format::Fp8BlockView& w, const TensorView& y) {
  run_linear(linear_operands(x, w, y));
}

void block_diagonal_linear(const TensorView& x, const TensorView& w, int64_t n_groups,
                           const TensorView& y) {
  run_block_diagonal(block_diagonal_operands(x, w, n_groups, y), n_groups);
}

void block_diagonal_linear(const TensorView& x, const format::Fp8BlockView& w, int64_t n_groups,
                           const TensorView& y) {
  run_block_diagonal(block_diagonal_operands(x, w, n_groups, y), n_groups);
}

}  // namespace dsv4::kernels::cpu

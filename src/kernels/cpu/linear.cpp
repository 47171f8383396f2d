// y[T, N] = x[T, K] · w[N, K]ᵀ through OpenBLAS (f32 accumulation), row by row so that a row's
// result never depends on the batch it came in (row_gemm.h). A bf16 weight (only a device keeps
// one, checkpoint/to_device.h; the tests hand one here) is widened to f32 first, exactly.
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
  const auto* bits = static_cast<const uint16_t*>(w.data);
  for (int64_t r = 0; r < w.n_rows; ++r) {
    for (int64_t k = 0; k < w.n_cols; ++k) {
      widened[r * w.n_cols + k] = bf16_to_float(bits[r * w.row_stride + k]);
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

}  // namespace

void linear(const TensorView& x, const TensorView& w, const TensorView& y) {
  const auto [a, b, c] = linear_operands(x, w, y);
  std::vector<float> widened;
  linear_block(a, 0, f32_weight(b, widened), 0, b.n_rows, c);
}

void block_diagonal_linear(const TensorView& x, const TensorView& w, int64_t n_groups,
                           const TensorView& y) {
  const auto [a, b, c] = block_diagonal_operands(x, w, n_groups, y);
  std::vector<float> widened;
  const RowMatrix w32 = f32_weight(b, widened);
  const int64_t rows = b.n_rows / n_groups;
  for (int64_t g = 0; g < n_groups; ++g) linear_block(a, g * a.n_cols, w32, g * rows, rows, c);
}

}  // namespace dsv4::kernels::cpu

// y[T, N] = x[T, K] · w[N, K]ᵀ through OpenBLAS (f32 accumulation), row by row so that a row's
// result never depends on the batch it came in (row_gemm.h). A bf16 weight (only a device keeps
// one, checkpoint/to_device.h; the tests hand one here) is widened to f32 first, exactly.
#include <vector>

#include "base/float_convert.h"
#include "kernels/contracts.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/row_gemm.h"

namespace dsv4::kernels::cpu {

void linear(const TensorView& x, const TensorView& w, const TensorView& y) {
  const auto [a, b, c] = linear_operands(x, w, y);
  std::vector<float> widened;
  const float* w_rows = static_cast<const float*>(b.data);
  int64_t w_stride = b.row_stride;
  if (b.dtype == DType::kBF16) {
    widened.resize(static_cast<size_t>(b.n_rows * b.n_cols));
    const auto* bits = static_cast<const uint16_t*>(b.data);
    for (int64_t r = 0; r < b.n_rows; ++r) {
      for (int64_t k = 0; k < b.n_cols; ++k) {
        widened[r * b.n_cols + k] = bf16_to_float(bits[r * b.row_stride + k]);
      }
    }
    w_rows = widened.data();
    w_stride = b.n_cols;
  }
  rows_times_transposed(a.data, a.row_stride, a.n_rows, w_rows, w_stride, b.n_rows, a.n_cols,
                        c.data, c.row_stride);
}

}  // namespace dsv4::kernels::cpu

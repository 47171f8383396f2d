// y[T, N] = x[T, K] · w[N, K]ᵀ through OpenBLAS (f32 accumulation), row by row so that a row's
// result never depends on the batch it came in (row_gemm.h).
#include "kernels/contracts.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/row_gemm.h"

namespace dsv4::kernels::cpu {

void linear(const TensorView& x, const TensorView& w, const TensorView& y) {
  const auto [a, b, c] = linear_operands(x, w, y);
  rows_times_transposed(a.data, a.row_stride, a.n_rows, b.data, b.row_stride, b.n_rows, a.n_cols,
                        c.data, c.row_stride);
}

}  // namespace dsv4::kernels::cpu

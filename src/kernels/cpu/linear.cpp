// y[T, N] = x[T, K] · w[N, K]ᵀ through OpenBLAS: the one place the CPU reference spends its time,
// so it goes to a tuned GEMM rather than a loop. sgemm accumulates in f32.
#include <cblas.h>

#include "kernels/contracts.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/row_matrix.h"

namespace dsv4::kernels::cpu {

void linear(const TensorView& x, const TensorView& w, const TensorView& y) {
  const auto [a, b, c] = linear_operands(x, w, y);
  if (a.n_rows == 0 || b.n_rows == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(a.n_rows),
              static_cast<int>(b.n_rows), static_cast<int>(a.n_cols), 1.0f, a.data,
              static_cast<int>(a.row_stride), b.data, static_cast<int>(b.row_stride), 0.0f, c.data,
              static_cast<int>(c.row_stride));
}

}  // namespace dsv4::kernels::cpu

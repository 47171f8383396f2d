// y[T, N] = x[T, K] · w[N, K]ᵀ through OpenBLAS: the one place the CPU reference spends its time,
// so it goes to a tuned GEMM rather than a loop. sgemm accumulates in f32.
#include <cblas.h>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/row_matrix.h"

namespace dsv4::kernels::cpu {

void linear(const TensorView& x, const TensorView& w, const TensorView& y) {
  const RowMatrix a = as_rows(x, "linear x");
  const RowMatrix b = as_rows(w, "linear w");
  const RowMatrix c = as_rows(y, "linear y");
  DSV4_CHECK(a.n_cols == b.n_cols, "linear: x has K=%lld, w has K=%lld", (long long)a.n_cols,
             (long long)b.n_cols);
  DSV4_CHECK(c.n_rows == a.n_rows && c.n_cols == b.n_rows,
             "linear: y is [%lld, %lld], expected [%lld, %lld]", (long long)c.n_rows,
             (long long)c.n_cols, (long long)a.n_rows, (long long)b.n_rows);
  if (a.n_rows == 0 || b.n_rows == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(a.n_rows),
              static_cast<int>(b.n_rows), static_cast<int>(a.n_cols), 1.0f, a.data,
              static_cast<int>(a.row_stride), b.data, static_cast<int>(b.row_stride), 0.0f, c.data,
              static_cast<int>(c.row_stride));
}

}  // namespace dsv4::kernels::cpu

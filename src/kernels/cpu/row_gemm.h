// The CPU reference's GEMM: C[r, :] = A[r, :] · Wᵀ one row at a time (cblas_sgemv). OpenBLAS's
// sgemm sums a row in an order that depends on how many rows share the call, so a token's
// result would change with its batch (a prefill chunk against one call, a decode step against a
// batch of sequences), and a near-tie in the indexer's top-k or the router's would then flip
// with it. Row by row, every result is independent of the batch (batch invariance: chunked
// prefill and decode give the bits of one call); the reference pays by reading W once per row.
#pragma once

#include <cblas.h>

#include <cstdint>

namespace dsv4::kernels::cpu {

// a [rows, k] with row stride lda, w [n, k] with row stride ldw, c [rows, n] with row stride ldc.
inline void rows_times_transposed(const float* a, int64_t lda, int64_t rows, const float* w,
                                  int64_t ldw, int64_t n, int64_t k, float* c, int64_t ldc) {
  if (n == 0) return;
  for (int64_t r = 0; r < rows; ++r) {
    if (k == 0) {
      for (int64_t j = 0; j < n; ++j) c[r * ldc + j] = 0.0f;
      continue;
    }
    cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(n), static_cast<int>(k), 1.0f, w,
                static_cast<int>(ldw), a + r * lda, 1, 0.0f, c + r * ldc, 1);
  }
}

}  // namespace dsv4::kernels::cpu

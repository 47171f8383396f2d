// The parameters of one FP8 block-scaled GEMM launch in device pointers (plain C++: filled by
// ops/fp8_linear.cu, read by the kernels).
//
//   D[M, N] = Σ_j (a_scales[m, j] · b_scales[n / 128, j]) · Σ_{k in block j} A[m, k] · B[n, k]
//
// Dimension letters: M rows of A and D (tokens), N rows of B (output features), K, Kb =
// ceil(K/128), Nb = ceil(N/128).
#pragma once

#include <cstdint>

namespace dsv4::kernels::cuda::sm90 {

struct Fp8GemmParams {
  const uint8_t* a = nullptr;       // e4m3 [M, K], dense rows (K a multiple of 16)
  const float* a_scales = nullptr;  // f32 [M, Kb]
  const uint8_t* b = nullptr;       // e4m3 [N, ldb]
  int64_t ldb = 0;                  // bytes between B's rows, a multiple of 16
  const float* b_scales = nullptr;  // f32 [Nb, Kb]
  float* d = nullptr;               // f32 [M, ldd]
  int64_t ldd = 0;
  int64_t m = 0, n = 0, k = 0;  // M, N, K
};

}  // namespace dsv4::kernels::cuda::sm90

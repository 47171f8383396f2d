// The parameters of one FP8 block-scaled GEMM launch in device pointers (plain C++: filled by
// ops/fp8_linear.cu, read by the kernels).
//
//   D[M, N] = Σ_j (a_scales[m, j] · b_scales[n / 128, j]) · Σ_{k in block j} A[m, k] · B[n, k]
//
// Block-diagonally with G groups (the attention's wo_a): B's and D's N columns are G runs of
// R = N / G, and group g's outputs n ∈ [g·R, (g+1)·R) read A's columns [g·K, (g+1)·K) and their
// scales [g·Kb, (g+1)·Kb), so A is [M, G·K] and its scales [M, G·Kb]. K and R are multiples of
// 128 there, so a 128-column block of A and a 128-row tile of B never straddle two groups.
//
// Dimension letters: M rows of A and D (tokens), N rows of B (output features), K, Kb =
// ceil(K/128), Nb = ceil(N/128), G groups, R = N / G.
#pragma once

#include <cstdint>

namespace dsv4::kernels::cuda::sm90 {

struct Fp8GemmParams {
  const uint8_t* a = nullptr;       // e4m3 [M, G·K], dense rows (K a multiple of 16)
  const float* a_scales = nullptr;  // f32 [M, G·Kb]
  const uint8_t* b = nullptr;       // e4m3 [N, ldb]
  int64_t ldb = 0;                  // bytes between B's rows, a multiple of 16
  const float* b_scales = nullptr;  // f32 [Nb, Kb]
  float* d = nullptr;               // f32 [M, ldd]
  int64_t ldd = 0;
  int64_t m = 0, n = 0, k = 0;  // M, N (all groups' rows), K (one group's columns)
  int64_t n_groups = 1;         // G
};

// Where weight row n's group starts in A's rows and in their scales' rows: the kernels' only use
// of the groups (n belongs to group n / R). constexpr so that device code may call it
// (--expt-relaxed-constexpr).
struct Fp8GroupOffsets {
  int64_t a_stride, a_scales_stride;  // G·K, G·Kb: A's and its scales' row strides
  int64_t a_column, a_scales_column;  // g·K, g·Kb
};
constexpr Fp8GroupOffsets fp8_group_offsets(const Fp8GemmParams& p, int64_t k_blocks,
                                            int64_t weight_row) {
  const int64_t group = p.n_groups == 1 ? 0 : weight_row / (p.n / p.n_groups);
  return {p.n_groups * p.k, p.n_groups * k_blocks, group * p.k, group * k_blocks};
}

}  // namespace dsv4::kernels::cuda::sm90

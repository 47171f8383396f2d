// FP8 as DeepSeek-V4 stores and runs it (../shared/docs/deepseek_v4.md; docs/numerics.md).
//
// Weights: E4M3 values with one scale per 128 × 128 block, W[n, k] = e4m3(w[n, k]) · s[n/128,
// k/128]. Checkpoints store s as E8M0 (a power of two) or f32; dsv4 holds it as f32 either way
// (a widened E8M0 is exact), so kernels read one scale type. Every scaled E4M3 value with a
// power-of-two scale is exactly a bf16, which is what lets the `exact` profile decode these
// weights inside its kernels without changing a bit.
//
// Activations (the `fast` profile only): E4M3 values with one f32 scale per row and 128
// consecutive columns (DeepSeek's act_quant, 1 × 128 groups); the scale rule lives with the op
// that quantizes (kernels/ops.h), not here.
//
// Dimension letters: N output rows, K input columns, Nb = ceil(N/128), Kb = ceil(K/128).
#pragma once

#include <cstdint>

#include "base/tensor.h"

namespace dsv4::format {

inline constexpr int kFp8WeightBlock = 128;     // rows and columns per weight scale
inline constexpr int kFp8ActivationGroup = 128;  // columns per activation scale
inline constexpr float kE4m3Max = 448.0f;       // largest finite E4M3 magnitude

// One FP8 matrix, row-major, rows possibly strided (a row slice of a fused projection, which
// starts on a 128-row boundary so its scales are a row slice of the parent's).
struct Fp8BlockView {
  const uint8_t* values = nullptr;       // e4m3 [N, K], row r at values + r · row_stride
  const float* block_scales = nullptr;   // f32 [Nb, Kb] row-major
  int64_t n_rows = 0;                    // N
  int64_t n_cols = 0;                    // K
  int64_t row_stride = 0;                // bytes between rows (≥ K)
  Device device = Device::kCpu;

  int64_t scale_rows() const { return (n_rows + kFp8WeightBlock - 1) / kFp8WeightBlock; }
  int64_t scale_cols() const { return (n_cols + kFp8WeightBlock - 1) / kFp8WeightBlock; }
};

}  // namespace dsv4::format

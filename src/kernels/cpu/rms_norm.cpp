// RMSNorm over the last dim: y = x / sqrt(mean(x²) + eps) ⊙ weight. transformers'
// DeepseekV4RMSNorm and DeepseekV4UnweightedRMSNorm compute the mean in f32; so do we (the
// inputs are f32 already), summing in double to keep the reference's rounding small, in the
// lane order of ops.h (kRmsNormLanes), which a GPU spreading one row over many threads and
// blocks can follow: the CUDA kernels give these bits.
#include <algorithm>
#include <array>
#include <cmath>

#include "kernels/contracts.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/row_matrix.h"

namespace dsv4::kernels::cpu {
namespace {

// Σ row[i]² over [0, n) in float64: lane j sums the elements j + k·L in turn, then the lanes
// are added pairwise, neighbours first. Lanes past n hold +0.0, which adds exactly, so the tree
// stops at the first power of two that covers the filled lanes.
double sum_of_squares(const float* row, int64_t n) {
  std::array<double, kRmsNormLanes> lanes;
  int64_t n_lanes = 1;
  while (n_lanes < n && n_lanes < kRmsNormLanes) n_lanes *= 2;
  std::fill_n(lanes.begin(), n_lanes, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    lanes[i % kRmsNormLanes] += static_cast<double>(row[i]) * row[i];
  }
  for (int64_t stride = 1; stride < n_lanes; stride *= 2) {
    for (int64_t j = 0; j < n_lanes; j += 2 * stride) lanes[j] += lanes[j + stride];
  }
  return lanes[0];
}

}  // namespace

void rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& y) {
  const auto [in, out, w] = rms_norm_operands(x, weight, y);
  const int64_t n = in.n_cols;
#pragma omp parallel for if (in.n_rows * n > (1 << 14))
  for (int64_t r = 0; r < in.n_rows; ++r) {
    const float* src = in.row(r);
    float* dst = out.row(r);
    const double sum_sq = sum_of_squares(src, n);
    const float inv_rms = 1.0f / std::sqrt(static_cast<float>(sum_sq / n) + eps);
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i] * inv_rms * (w ? w[i] : 1.0f);
  }
}

}  // namespace dsv4::kernels::cpu

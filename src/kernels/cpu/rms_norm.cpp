// RMSNorm over the last dim: y = x / sqrt(mean(x²) + eps) ⊙ weight. transformers'
// DeepseekV4RMSNorm and DeepseekV4UnweightedRMSNorm compute the mean in f32; so do we (the
// inputs are f32 already), summing in double to keep the reference's rounding small.
#include <cmath>

#include "kernels/contracts.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/row_matrix.h"

namespace dsv4::kernels::cpu {

void rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& y) {
  const auto [in, out, w] = rms_norm_operands(x, weight, y);
  const int64_t n = in.n_cols;
#pragma omp parallel for if (in.n_rows * n > (1 << 14))
  for (int64_t r = 0; r < in.n_rows; ++r) {
    const float* src = in.row(r);
    float* dst = out.row(r);
    double sum_sq = 0.0;
    for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(src[i]) * src[i];
    const float inv_rms = 1.0f / std::sqrt(static_cast<float>(sum_sq / n) + eps);
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i] * inv_rms * (w ? w[i] : 1.0f);
  }
}

}  // namespace dsv4::kernels::cpu

// The model's dense linears on their weights as the load placed them (checkpoint::LinearWeight):
// f32 or bf16 values; or an FP8 checkpoint's e4m3 codes with their block scales, which in the
// exact profile the linear kernels decode exactly (kernels/ops.h), so either form gives the bits
// of the decoded weight, and in the fast profile run as DeepSeek's FP8 GEMM on the activation
// quantized in 1 × 128 groups (kernels::linear_fp8). The profile is the model's
// (ModelOptions::numerics), passed down to each call: the weights do not carry one.
#pragma once

#include <cstdint>

#include "base/tensor.h"
#include "checkpoint/weights.h"
#include "dsv4/numerics.h"
#include "dsv4/status.h"

namespace dsv4::model {

// y[T, N] = x[T, K] · w[N, K]ᵀ in profile `numerics`. The fast profile's FP8 GEMM needs K a
// multiple of 16 (every V4 linear's is); an FP8 weight of another width, and any weight that is
// not FP8, runs the exact linear.
Status linear(const TensorView& x, const checkpoint::LinearWeight& w, const TensorView& y,
              Numerics numerics);

// One input's two linears (the shared expert's w1 and w3): a.y = x · a.wᵀ and b.y = x · b.wᵀ,
// with linear()'s bits. Where both run the fast profile's FP8 GEMM, x is quantized once for
// both: a launch fewer than two linear() calls.
struct LinearOutput {
  const checkpoint::LinearWeight& w;
  TensorView y;
};
Status linear_pair(const TensorView& x, const LinearOutput& a, const LinearOutput& b,
                   Numerics numerics);

// The grouped form (kernels::block_diagonal_linear): the attention's wo_a, exact in both
// profiles (DeepSeek's inference dequantizes wo_a to bf16 and runs it in bf16).
Status block_diagonal_linear(const TensorView& x, const checkpoint::LinearWeight& w,
                             int64_t n_groups, const TensorView& y);

}  // namespace dsv4::model

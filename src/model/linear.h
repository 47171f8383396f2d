// The model's dense linears on their weights as the load left them (checkpoint::LinearWeight):
// f32 or bf16 values, or an FP8 checkpoint's e4m3 codes with their block scales, which the
// kernels decode exactly (kernels/ops.h), so either form gives the bits of the decoded weight.
#pragma once

#include <cstdint>

#include "base/tensor.h"
#include "checkpoint/weights.h"
#include "dsv4/status.h"

namespace dsv4::model {

// y[T, N] = x[T, K] · w[N, K]ᵀ (kernels::linear).
Status linear(const TensorView& x, const checkpoint::LinearWeight& w, const TensorView& y);

// The grouped form (kernels::block_diagonal_linear): the attention's wo_a.
Status block_diagonal_linear(const TensorView& x, const checkpoint::LinearWeight& w,
                             int64_t n_groups, const TensorView& y);

}  // namespace dsv4::model

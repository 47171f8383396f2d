// The model's dense linears on their weights as the load placed them (checkpoint::LinearWeight):
// f32 or bf16 values; or an FP8 checkpoint's e4m3 codes with their block scales, which in the
// exact profile the linear kernels decode exactly (kernels/ops.h), so either form gives the bits
// of the decoded weight, and in the fast profile run as DeepSeek's FP8 GEMM on the activation
// quantized in 1 × 128 groups (kernels::linear_fp8). The profile is the model's
// (ModelOptions::numerics), passed down to each call: the weights do not carry one.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "base/buffer.h"
#include "base/tensor.h"
#include "checkpoint/weights.h"
#include "dsv4/numerics.h"
#include "dsv4/status.h"
#include "kernels/ops.h"

namespace dsv4::model {

// A linear's input: the f32 activation x [T, K], and its FP8 form (x quantized in 1 × 128
// groups, kernels::quantize_activation_fp8's bytes) where the op that made x wrote that too
// (kernels/ops.h: rms_norm_fp8, swiglu_fp8, hc_pre_norm_fp8), else an empty one. The fast
// profile's FP8 GEMM reads the FP8 form instead of quantizing x in a launch of its own: the same
// bytes, so the same output.
struct LinearInput {
  LinearInput(const TensorView& x_) : x(x_) {}  // NOLINT: an activation nothing quantized
  LinearInput(const TensorView& x_, const kernels::Fp8Activation& fp8_) : x(x_), fp8(fp8_) {}

  bool quantized() const { return fp8.values.data != nullptr; }
  LinearInput rows(int64_t begin, int64_t end) const;  // rows [begin, end) of both forms

  TensorView x;
  kernels::Fp8Activation fp8;
};

// Room for an activation's FP8 form (codes f8_e4m3 [T, K], scales f32 [T, Kb], Kb = ceil(K/128))
// from the model's scratch, made only where one of the linears that read the activation runs
// the fast profile's FP8 GEMM (null readers are skipped); else empty, and its producer writes
// the f32 activation alone.
struct Fp8Room {
  Tensor values, scales;
  bool empty() const { return values.view().data == nullptr; }
  kernels::Fp8Activation view() const { return {values.view(), scales.view()}; }
};
Result<Fp8Room> fp8_room(int64_t n_rows, int64_t n_cols, Device device, Numerics numerics,
                         std::initializer_list<const checkpoint::LinearWeight*> readers);

// The same for the input [T, G·K] of block_diagonal_linear's w: room only where that runs the
// grouped FP8 GEMM (its conditions, below, are stricter than linear()'s).
Result<Fp8Room> block_diagonal_fp8_room(int64_t n_rows, int64_t n_cols, Device device,
                                        Numerics numerics, const checkpoint::LinearWeight& w,
                                        int64_t n_groups);

// y = rms_norm(x, weight, eps) (kernels::rms_norm; y may alias x) for the linears that read y,
// and, where y_fp8 is room (Fp8Room::view), y's FP8 form there in the same launch
// (kernels::rms_norm_fp8); with an empty y_fp8 the plain norm.
Status rms_norm_for_linears(const TensorView& x, const TensorView& weight, float eps,
                            const TensorView& y, const kernels::Fp8Activation& y_fp8);

// y[T, N] = x[T, K] · w[N, K]ᵀ in profile `numerics`. The fast profile's FP8 GEMM needs K a
// multiple of 16 (every V4 linear's is); an FP8 weight of another width, and any weight that is
// not FP8, runs the exact linear. The GEMM quantizes x unless x comes quantized.
Status linear(const LinearInput& x, const checkpoint::LinearWeight& w, const TensorView& y,
              Numerics numerics);

// One input's two linears (the shared expert's w1 and w3): a.y = x · a.wᵀ and b.y = x · b.wᵀ,
// with linear()'s bits. Where both run the fast profile's FP8 GEMM, x is quantized once for
// both (or not at all when it comes quantized).
struct LinearOutput {
  const checkpoint::LinearWeight& w;
  TensorView y;
};
Status linear_pair(const LinearInput& x, const LinearOutput& a, const LinearOutput& b,
                   Numerics numerics);

// The grouped form (kernels::block_diagonal_linear): the attention's wo_a. The exact profile
// runs it exactly; the fast one, for an FP8 weight whose group width K and group rows R are
// multiples of 128 (V4's 4096 and 1024), quantizes x [T, G·K] in 1 × 128 groups once (or takes
// it quantized) and runs kernels::block_diagonal_linear_fp8, the FP8 GEMM of every group in one
// call (DeepSeek's inference runs wo_a in bf16 instead; docs/numerics.md says what that departs
// from).
Status block_diagonal_linear(const LinearInput& x, const checkpoint::LinearWeight& w,
                             int64_t n_groups, const TensorView& y, Numerics numerics);

}  // namespace dsv4::model

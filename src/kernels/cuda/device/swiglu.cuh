// The clamped SwiGLU of DeepSeek-V4's experts on the device, one definition for every kernel
// that applies it (the element-wise op, the MoE expert kernels, the NVFP4 GEMM's SwiGLU
// epilogue): gate clamped above and up on both sides at `limit` (none when limit ≤ 0), then
// silu(gate) · up in the order cpu::swiglu rounds it.
#pragma once

#include "base/tensor.h"

namespace dsv4::kernels::cuda {

__device__ __forceinline__ float swiglu(float gate, float up, float limit) {
  if (limit > 0.0f) {
    gate = fminf(gate, limit);
    up = fminf(fmaxf(up, -limit), limit);
  }
  return __fmul_rn(__fdiv_rn(gate, __fadd_rn(1.0f, expf(-gate))), up);
}

// act [T, F] (f32 or bf16) = swiglu(gate_up[:, j], gate_up[:, F + j]) of an f32 [T, 2F] on
// op_stream() (swiglu_rows.cu); F and both row strides multiples of 4.
void launch_swiglu_rows(const TensorView& gate_up, float limit, const TensorView& act);

}  // namespace dsv4::kernels::cuda

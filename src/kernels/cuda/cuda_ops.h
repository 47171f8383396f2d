// The CUDA implementations of the ops in kernels/ops.h: host launch functions in plain C++ (no
// CUDA headers), same contracts as the CPU reference in kernels/cpu/cpu_ops.h, which each is
// tested against. Called only by ops.cpp, after it checked that the tensors are on the device.
// They return a non-OK Status only for a variant the device does not implement (e.g. an f32
// W4A16 operand) or for scratch the device has no memory for (resource_exhausted, scratch.h);
// any other CUDA error is a bug and aborts through DSV4_CUDA_CHECK.
#pragma once

#include "base/tensor.h"
#include "dsv4/status.h"
#include "format/nvfp4.h"
#include "kernels/ops.h"

namespace dsv4::kernels::cuda {

// The plain ops (one small .cu each or per family, mirroring kernels/cpu/). Each says in its .cu
// how it relates to the CPU: bit-identical (rms_norm, add, embedding, hc_repeat/collapse/expand,
// moe_gather/combine, moe_group, topk) or equal up to f32 summation order and libm ulps (the rest).
using RefusableOp = Status;  // unimplemented for a variant this device lacks; resource_exhausted
#include "kernels/backend_ops.inc"

// ---- NVFP4 GEMMs with SwiGLU (CUDA only: the CPU composes nvfp4_gemm and swiglu) ----
// An MoE's L1 with its SwiGLU: act [T, F] (f32 or bf16) = swiglu(alpha · gate, alpha · up), the
// GEMM's halves over B's 2F rows (gate [0, F), up [F, 2F)), clamped at `limit` as cpu::swiglu.
// The warp-specialised kernel applies it in its epilogue; where the shape gets another kernel,
// gate_up (f32 [T, 2F], the caller's scratch, written only then) takes the GEMM's output and a
// row kernel the SwiGLU.
Status nvfp4_gemm_swiglu(const TensorView& a, const format::Nvfp4View& b, float limit,
                         const TensorView& gate_up, const TensorView& act);
Status nvfp4_gemm_swiglu(const StagedActivation& a, const format::Nvfp4View& b, float limit,
                         const TensorView& gate_up, const TensorView& act);
Status nvfp4_grouped_gemm_swiglu(const TensorView& a, const format::Nvfp4View& b,
                                 const TensorView& group_offsets, float limit,
                                 const TensorView& gate_up, const TensorView& act);
Status nvfp4_grouped_gemm_swiglu(const StagedActivation& a, const format::Nvfp4View& b,
                                 const TensorView& group_offsets, float limit,
                                 const TensorView& gate_up, const TensorView& act);

// ---- MoE (kernels/cuda/moe/): the fused block; equal to cpu::moe_ffn up to f32 summation order
// (W4A16) and the activation re-quantization that order can flip (W4A4) ----
int64_t moe_ffn_workspace_bytes(int64_t n_tokens, const MoeWeightsView& w, const MoeConfig& cfg);
Status moe_ffn(const TensorView& x, const TensorView& token_ids, const MoeWeightsView& w,
               const MoeConfig& cfg, const TensorView& workspace, const TensorView& y);

}  // namespace dsv4::kernels::cuda

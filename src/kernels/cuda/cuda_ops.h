// The CUDA implementations of the ops in kernels/ops.h: host launch functions in plain C++ (no
// CUDA headers), same contracts as the CPU reference in kernels/cpu/cpu_ops.h, which each is
// tested against. Called only by ops.cpp, after it checked that the tensors are on the device.
// They return a non-OK Status only for a variant the device does not implement (e.g. an f32
// W4A16 operand); a CUDA error is a bug and aborts through DSV4_CUDA_CHECK.
#pragma once

#include "base/tensor.h"
#include "dsv4/status.h"
#include "format/nvfp4.h"
#include "kernels/ops.h"

namespace dsv4::kernels::cuda {

// The plain ops (one small .cu each or per family, mirroring kernels/cpu/). Each says in its .cu
// how it relates to the CPU: bit-identical (rms_norm, add, embedding, hc_repeat/collapse/expand,
// moe_gather/combine, moe_group, topk) or equal up to f32 summation order and libm ulps (the rest).
#include "kernels/backend_ops.inc"

// ---- NVFP4: bit-identical to cpu::stage_activation; GEMMs equal to the CPU up to the f32
// summation order (exact bf16 products, alpha applied once in the epilogue) ----
Status stage_activation(const TensorView& x, const TensorView& input_scale,
                        const StagedActivation& out);
Status nvfp4_gemm(const StagedActivation& a, const format::Nvfp4View& b, const TensorView& d);
Status nvfp4_gemm(const TensorView& a, const format::Nvfp4View& b, const TensorView& d);
Status nvfp4_grouped_gemm(const StagedActivation& a, const format::Nvfp4View& b,
                          const TensorView& group_offsets, const TensorView& d);
Status nvfp4_grouped_gemm(const TensorView& a, const format::Nvfp4View& b,
                          const TensorView& group_offsets, const TensorView& d);
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

// ---- FP8 (gemm/fp8/README.md): the quantizer bit-identical to the CPU's; the GEMM equal to the
// CPU up to the tensor cores' partial sums and the blocks' summation order (ops.h states the
// bound). An unimplemented Status where K or w's row stride is not a multiple of 16. ----
void quantize_activation_fp8(const TensorView& x, const Fp8Activation& out);
Status linear_fp8(const Fp8Activation& a, const format::Fp8BlockView& w, const TensorView& y);

// ---- MoE (kernels/cuda/moe/): the fused block; equal to cpu::moe_ffn up to f32 summation order
// (W4A16) and the activation re-quantization that order can flip (W4A4) ----
int64_t moe_ffn_workspace_bytes(int64_t n_tokens, const MoeWeightsView& w, const MoeConfig& cfg);
Status moe_ffn(const TensorView& x, const TensorView& token_ids, const MoeWeightsView& w,
               const MoeConfig& cfg, const TensorView& workspace, const TensorView& y);

}  // namespace dsv4::kernels::cuda

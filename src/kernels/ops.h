// The device-agnostic ops the model is written against. Every op has a CPU reference
// (kernels/cpu/) and, where it matters for speed, a CUDA implementation (kernels/cuda/) with
// the same contract; ops.cpp dispatches on the tensors' device and is the only place in the
// tree that branches on it. Tensors are TensorViews; shapes are in the comments.
//
// Contract shared by every op: all tensors of one call live on one device; shapes and dtypes
// that do not match the comment are bugs (DSV4_CHECK), never user errors, because the loader
// validated every weight. An op returns a non-OK Status only when the device has no
// implementation of it.
//
// Dimension letters: T tokens (rows), D model width, N output features, K input features,
// E experts, F expert width, M residual streams (hc_mult).
#pragma once

#include "base/tensor.h"
#include "dsv4/status.h"
#include "format/nvfp4.h"

namespace dsv4::kernels {

// ---- Dense ops (f32) --------------------------------------------------------------------------
// Row-major 2-D views whose rows may be strided (stride[1] == 1): a column slice of a wider
// matrix is a valid operand, so fused projections (gate|up) need no copy.

// y[T, N] = x[T, K] · w[N, K]ᵀ, f32 accumulation (OpenBLAS sgemm on the CPU).
Status linear(const TensorView& x, const TensorView& w, const TensorView& y);

// y[T, D] = x / sqrt(mean(x²) + eps) ⊙ weight[D], the mean over the last dim in f32.
// An empty `weight` (data == nullptr) gives the unweighted norm (mHC input norm, per-head q
// norm). y may alias x.
Status rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& y);

// y[T, N] = softmax of each row (max-subtracted). y may alias x.
Status softmax(const TensorView& x, const TensorView& y);

// out[T, F] = silu(min(gate, limit)) · clamp(up, -limit, limit) with gate = gate_up[:, :F] and
// up = gate_up[:, F:] (transformers' DeepseekV4Experts._apply_gate: the gate gets no lower
// clamp). limit == 0 disables both clamps.
Status swiglu(const TensorView& gate_up, float limit, const TensorView& out);

// y = a + b, same shape, contiguous. y may alias a or b.
Status add(const TensorView& a, const TensorView& b, const TensorView& y);

// y[T, D] = table[ids[t], :]; ids i64 [T], each in [0, V) (the caller validated them).
Status embedding(const TensorView& table, const TensorView& ids, const TensorView& y);

// ---- NVFP4 (docs/nvfp4.md) ----------------------------------------------------------------------
// Weights are format::Nvfp4View stacks [G, N, K]; activations are staged into the same format
// with one global scale. GEMMs decode both operands to their exact values (every e2m1 · ue4m3
// is exact in bf16), accumulate in f32 and apply the global scales once, as the epilogue alpha:
//   W4A4:  D = alpha · Σ_k (a·sfa)(b·sfb),  alpha = a.global_scale · b.global_scale[g]
//   W4A16: D = alpha · Σ_k  a   · (b·sfb),  alpha = b.global_scale[g]
// computed as the fp32 product alpha (a·b in that order), then D = alpha · acc, then the
// rounding to bf16 if D is bf16. The CUDA exact path reproduces this up to summation order.

// An activation in NVFP4 is a format::StagedActivation, defined with the format so that
// calls from kernels/cpu and kernels/cuda never find these ops by argument-dependent lookup.
using format::StagedActivation;

// Quantizes x f32|bf16 [T, K] (K a multiple of 16) into `out` with the exact arithmetic of
// format::quantize_nvfp4_block. Global scale:
//   static  (input_scale f32 [1], ModelOpt's calibrated decode scale): decode = input_scale;
//   dynamic (input_scale empty, data == nullptr): decode = amax|x| / 2688 over the whole tensor;
// then encode = 1 / decode (format::GlobalScale). out.global_scale[0] = decode. Swizzled
// padding bytes are written as zero.
Status stage_activation(const TensorView& x, const TensorView& input_scale,
                        const StagedActivation& out);

// d f32|bf16 [T, N] = alpha · a[T, K] · b[0]ᵀ for a one-matrix stack b [1, N, K].
Status nvfp4_gemm(const StagedActivation& a, const format::Nvfp4View& b, const TensorView& d);
// W4A16: a bf16 [T, K] (the CUDA path) or f32 (CPU only).
Status nvfp4_gemm(const TensorView& a, const format::Nvfp4View& b, const TensorView& d);

// MoE: rows of a are grouped by expert. group_offsets i32 [G+1] on the operands' device:
// offsets[0] = 0, non-decreasing, offsets[G] = T; rows [offsets[g], offsets[g+1]) multiply
// b[g] with alpha[g]. Empty groups are allowed. d f32|bf16 [T, N].
Status nvfp4_grouped_gemm(const StagedActivation& a, const format::Nvfp4View& b,
                          const TensorView& group_offsets, const TensorView& d);
Status nvfp4_grouped_gemm(const TensorView& a, const format::Nvfp4View& b,
                          const TensorView& group_offsets, const TensorView& d);

}  // namespace dsv4::kernels

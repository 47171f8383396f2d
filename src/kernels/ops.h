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

}  // namespace dsv4::kernels

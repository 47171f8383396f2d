// The CPU reference of every op in kernels/ops.h: plain loops, f32 accumulation, OpenMP across
// rows at most, GEMMs through OpenBLAS. Same contracts as ops.h; called only by ops.cpp, which
// has already checked that the tensors are on the host.
#pragma once

#include "base/tensor.h"
#include "format/nvfp4.h"
#include "kernels/ops.h"

namespace dsv4::kernels::cpu {

using RefusableOp = void;  // the reference implements every variant
#include "kernels/backend_ops.inc"

// ---- The fused MoE block (the CUDA side takes a workspace) ----
void moe_ffn(const TensorView& x, const TensorView& token_ids, const MoeWeightsView& w,
             const MoeConfig& cfg, const TensorView& y);

// moe_route after its scores: the selection and weights from scores f32 [T, E] (sqrt(softplus)
// of the logits) instead of the logits. The reference of the CUDA routers' selection, which
// the tests hand the scores the device computed, so that ids and weights compare bit for bit.
void moe_select(const TensorView& scores, const TensorView& bias, const TensorView& hash_ids,
                float route_scale, const MoeRouting& out);

// Work (multiply-adds or elements) below which an attention op stays on one thread: a parallel
// region's fork and join cost more than a smaller loop, far more on a loaded machine.
inline constexpr int64_t kParallelWork = int64_t{1} << 16;

}  // namespace dsv4::kernels::cpu

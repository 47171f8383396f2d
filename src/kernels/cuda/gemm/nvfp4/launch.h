// Launching the sm_90a NVFP4 GEMM kernels for one filled Nvfp4GemmParams (launch.cu). Plain C++
// so the op layer (kernels/cuda/ops/nvfp4_gemm.cu) and the benchmark can call it. Runs on the
// default stream; never synchronises, so it can be captured in a CUDA graph.
#pragma once

#include "kernels/cuda/gemm/nvfp4/params.h"
#include "kernels/cuda/gemm/nvfp4/plan.h"

namespace dsv4::kernels::cuda::sm90 {

// plan_nvfp4_gemm for p on the current device.
Nvfp4GemmPlan plan_for(const Nvfp4GemmParams& p);

// Runs D = alpha · A · Bᵀ per group as p describes. With the small-M plan and a bf16 D,
// p.accum must point to an f32 [T, N] scratch; with an f32 D, p.accum is ignored (D is used).
void launch_nvfp4_gemm(Nvfp4GemmParams p, const Nvfp4GemmPlan& plan);

}  // namespace dsv4::kernels::cuda::sm90

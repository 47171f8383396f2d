// Host entry of the sm_90a FP8 GEMM family: the plan for a call's shape, and its launch.
#pragma once

#include "kernels/cuda/gemm/fp8/params.h"
#include "kernels/cuda/gemm/fp8/plan.h"

namespace dsv4::kernels::cuda::sm90 {

// plan_fp8_gemm for p's shape on this device.
Fp8GemmPlan plan_for(const Fp8GemmParams& p);

// Runs p with `plan` on the op stream (no rows, outputs or columns: writes the zeros it owes).
void launch_fp8_gemm(const Fp8GemmParams& p, const Fp8GemmPlan& plan);

}  // namespace dsv4::kernels::cuda::sm90

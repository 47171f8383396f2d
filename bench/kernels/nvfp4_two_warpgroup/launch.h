// The two-warpgroup NVFP4 GEMM that the library's warp-specialised kernel replaced (kernel.cuh),
// for nvfp4_gemm_bench to time beside it on the same calls. Plain C++.
#pragma once

#include "kernels/cuda/gemm/nvfp4/params.h"

namespace dsv4::bench {

// D = alpha · A · Bᵀ per group as p describes (bf16 D), on op_stream(): 128 × 256 output tiles
// where there are enough of them for the n_sm multiprocessors, else 128 × 128, on a persistent
// grid.
void launch_two_warpgroup(const kernels::cuda::sm90::Nvfp4GemmParams& p, int n_sm);

}  // namespace dsv4::bench

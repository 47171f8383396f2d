// Tile shape of the two-warpgroup NVFP4 GEMM (kernel.cuh): a 128×256 output tile per CTA, two
// consumer warpgroups of 64 rows each, K in the library's steps of 64 (kTileK).
#pragma once

#include "kernels/cuda/gemm/nvfp4/config.h"

namespace dsv4::kernels::cuda::sm90::two_warpgroup {

inline constexpr int kTileM = 128;
inline constexpr int kTileN = 256;
inline constexpr int kStages = 4;     // cp.async ring depth for A (bf16) and raw B (NVFP4)
inline constexpr int kThreads = 256;  // two warpgroups
inline constexpr int kSmemA = kStages * kTileM * kTileK * 2;  // bf16 ring, 128B-swizzled

}  // namespace dsv4::kernels::cuda::sm90::two_warpgroup

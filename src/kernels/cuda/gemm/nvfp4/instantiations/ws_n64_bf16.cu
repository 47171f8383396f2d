// The warp-specialised kernel with 64-token tiles, bf16 output: grouped calls of 33 to 64 rows
// per group on average (V4-Flash's MoE at 2048 tokens), where a 128-token tile's MMA work would be
// half empty (plan.cpp).
#include "kernels/cuda/gemm/nvfp4/launch_ws.cuh"

namespace dsv4::kernels::cuda::sm90 {
template void launch_ws<64, true>(Nvfp4GemmParams p, int grid, bool tma);
}  // namespace dsv4::kernels::cuda::sm90

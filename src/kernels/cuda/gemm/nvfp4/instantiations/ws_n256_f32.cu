// The warp-specialised kernel with 256-token tiles, f32 output: one matrix with at least as many
// 256-token tiles as SMs, grouped calls of more than 128 rows per group on average
// (plan.cpp).
#include "kernels/cuda/gemm/nvfp4/launch_ws.cuh"

namespace dsv4::kernels::cuda::sm90 {
template void launch_ws<256, false>(Nvfp4GemmParams p, int grid, bool tma);
}  // namespace dsv4::kernels::cuda::sm90

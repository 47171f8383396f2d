// The warp-specialised kernel with 128-token tiles, f32 output: one matrix with fewer 256-token
// tiles than SMs, grouped calls of 65 to 128 rows per group on average (plan.cpp).
#include "kernels/cuda/gemm/nvfp4/launch_ws.cuh"

namespace dsv4::kernels::cuda::sm90 {
template void launch_ws<128, false>(Nvfp4GemmParams p, int grid, bool tma);
}  // namespace dsv4::kernels::cuda::sm90

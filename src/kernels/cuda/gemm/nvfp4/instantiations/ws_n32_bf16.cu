// The warp-specialised kernel with 32-token tiles, bf16 output: grouped calls of 17 to 32 rows
// per group on average (an MoE's experts at prefill sizes), where a 128-token tile would be
// mostly empty MMA work and the small-M kernel is slower (plan.cpp).
#include "kernels/cuda/gemm/nvfp4/launch_ws.cuh"

namespace dsv4::kernels::cuda::sm90 {
template void launch_ws<32, true>(Nvfp4GemmParams p, int grid, bool tma);
}  // namespace dsv4::kernels::cuda::sm90

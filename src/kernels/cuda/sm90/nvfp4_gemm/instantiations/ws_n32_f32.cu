// The warp-specialised kernel with 32-token tiles, f32 output: grouped calls whose groups have
// few rows (an MoE's experts at prefill sizes), where a wider tile would be mostly empty MMA work.
#include "kernels/cuda/sm90/nvfp4_gemm/launch_wgmma.cuh"

namespace dsv4::kernels::cuda::sm90 {
template void launch_ws<32, false>(Nvfp4GemmParams p, int grid, bool tma);
}  // namespace dsv4::kernels::cuda::sm90

// wgmma kernels with a tile width of 256, bf16 output: 256-column tiles of the two-warpgroup
// kernel and 256-token tiles of the warp-specialised one.
#include "kernels/cuda/gemm/nvfp4/launch_wgmma.cuh"

namespace dsv4::kernels::cuda::sm90 {
template void launch_wgmma<256, true>(const Nvfp4GemmParams& p, int grid);
template void launch_ws<256, true>(Nvfp4GemmParams p, int grid, bool tma);
}  // namespace dsv4::kernels::cuda::sm90

// wgmma kernel, 128-column tiles, f32 output.
#include "kernels/cuda/sm90/nvfp4_gemm/launch_wgmma.cuh"

namespace dsv4::kernels::cuda::sm90 {
template void launch_wgmma<128, false>(const Nvfp4GemmParams& p, int grid);
}  // namespace dsv4::kernels::cuda::sm90

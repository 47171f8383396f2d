// wgmma kernel, 128-column tiles, bf16 output.
#include "kernels/cuda/sm90/nvfp4_gemm/launch_wgmma.cuh"

namespace dsv4::kernels::cuda::sm90 {
template void launch_wgmma<128, true>(const Nvfp4GemmParams& p, int grid);
}  // namespace dsv4::kernels::cuda::sm90

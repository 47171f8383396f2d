// The launcher templates of the wgmma kernels, explicitly instantiated once per tile width and
// output type in instantiations/ (one heavy kernel per translation unit keeps builds parallel).
#pragma once

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"
#include "kernels/cuda/sm90/nvfp4_gemm/kernel.cuh"
#include "kernels/cuda/sm90/nvfp4_gemm/ws_kernel.cuh"

namespace dsv4::kernels::cuda::sm90 {

template <int kBN, bool kOutBf16>
void launch_wgmma(const Nvfp4GemmParams& p, int grid) {
  auto* kernel = &nvfp4_dequant_gemm_sm90_kernel<kBN, kOutBf16>;
  constexpr int kBytes = WgmmaSmem<kBN>::kBytes;
  static const bool configured = [&] {
    DSV4_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
    return true;
  }();
  (void)configured;
  kernel<<<grid, kThreads, kBytes, op_stream()>>>(p);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

// The warp-specialised kernel: kBM tokens per tile.
template <int kBM, bool kOutBf16>
void launch_ws(const Nvfp4GemmParams& p, int grid) {
  auto* kernel = &nvfp4_ws_gemm_sm90_kernel<kBM, kOutBf16>;
  constexpr int kBytes = WsSmem<kBM>::kBytes;
  static const bool configured = [&] {
    DSV4_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
    return true;
  }();
  (void)configured;
  kernel<<<grid, kWsThreads, kBytes, op_stream()>>>(p);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dsv4::kernels::cuda::sm90

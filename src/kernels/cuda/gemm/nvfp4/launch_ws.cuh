// The launcher template of the warp-specialised kernel, explicitly instantiated once per token
// tile width and output type in instantiations/ (one heavy kernel per translation unit keeps
// builds parallel).
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (types only)

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"
#include "kernels/cuda/gemm/nvfp4/ws_kernel.cuh"

namespace dsv4::kernels::cuda::sm90 {

// The tensor map of A (bf16 [T, K] at row stride lda) for the warp-specialised kernel's token
// tiles: a [rows, 64] box in the 128-byte swizzle, zero fill past T and K. False when A's
// address or stride rule a map out or the driver lacks the encoder; the kernel then uses
// cp.async. The encoder comes from the driver at run time (cudaGetDriverEntryPointByVersion),
// so nothing links libcuda.
inline bool encode_token_map(const Nvfp4GemmParams& p, int rows, CUtensorMap* map) {
  using EncodeFn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                                const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                                const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static const EncodeFn encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return EncodeFn{nullptr};
    }
    return reinterpret_cast<EncodeFn>(fn);
  }();
  // TMA needs a 16-byte aligned base and row stride.
  if (encode == nullptr || reinterpret_cast<uintptr_t>(p.a) % 16 != 0 || (p.lda * 2) % 16 != 0) {
    return false;
  }
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(p.k), static_cast<cuuint64_t>(p.n_rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(p.lda) * 2};  // bytes, dims 1..
  const cuuint32_t box[2] = {kTileK, static_cast<cuuint32_t>(rows)};
  const cuuint32_t element_strides[2] = {1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<uint16_t*>(p.a), dims,
                strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// The warp-specialised kernel: kBM tokens per tile; tokens by TMA when `tma` and A allows.
template <int kBM, bool kOutBf16>
void launch_ws(Nvfp4GemmParams p, int grid, bool tma) {
  auto* kernel = &nvfp4_ws_gemm_sm90_kernel<kBM, kOutBf16>;
  constexpr int kBytes = WsSmem<kBM>::kBytes;
  static const bool configured = [&] {
    DSV4_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes));
    return true;
  }();
  (void)configured;
  CUtensorMap map{};
  p.a_tma = tma && encode_token_map(p, kBM, &map);
  kernel<<<grid, kWsThreads, kBytes, op_stream()>>>(p, map);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dsv4::kernels::cuda::sm90

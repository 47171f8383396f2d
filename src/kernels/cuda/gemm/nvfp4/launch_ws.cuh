// The launcher template of the warp-specialised kernel, explicitly instantiated once per token
// tile width and output type in instantiations/ (one heavy kernel per translation unit keeps
// builds parallel).
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (types only)

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/gemm/nvfp4/ws_kernel.cuh"
#include "kernels/cuda/stream.h"
#include "kernels/cuda/tensor_map.h"

namespace dsv4::kernels::cuda::sm90 {

// The tensor map of A (bf16 [T, K] at row stride lda) for the warp-specialised kernel's token
// tiles: a [rows, 64] box in the 128-byte swizzle, zero fill past T and K. False when A's
// address or stride rule a map out or the driver lacks the encoder; the kernel then uses
// cp.async.
inline bool encode_token_map(const Nvfp4GemmParams& p, int rows, CUtensorMap* map) {
  return encode_tensor_map_2d(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, p.a,
                              static_cast<uint64_t>(p.k), static_cast<uint64_t>(p.n_rows),
                              static_cast<uint64_t>(p.lda) * 2, kTileK,
                              static_cast<uint32_t>(rows));
}

// The warp-specialised kernel: kBM tokens per tile; tokens by TMA when `tma` and A allows.
template <int kBM, bool kOutBf16>
void launch_ws(Nvfp4GemmParams p, int grid, bool tma) {
  auto* kernel = &nvfp4_ws_gemm_sm90_kernel<kBM, kOutBf16>;
  constexpr int kBytes = WsSmem<kBM>::kBytes;
  [[maybe_unused]] static const bool allowed = allow_dynamic_smem(kernel, kBytes);
  CUtensorMap map{};
  p.a_tma = tma && encode_token_map(p, kBM, &map);
  kernel<<<grid, kWsThreads, kBytes, op_stream()>>>(p, map);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dsv4::kernels::cuda::sm90

// Tensor maps (TMA descriptors) for 2-D row-major operands, encoded through the driver's
// cuTensorMapEncodeTiled fetched at run time (cudaGetDriverEntryPointByVersion), so nothing
// links libcuda. Host code; the kernels take the map as a __grid_constant__ parameter.
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (types only)
#include <cuda_runtime.h>

#include <cstdint>

namespace dsv4::kernels::cuda {

// A map of the [outer, inner] matrix at `base` (rows row_bytes apart) read in boxes of
// [box_outer, box_inner] elements with the 128-byte swizzle and zero fill past the edges.
// False when the driver has no encoder or the operand breaks TMA's rules (16-byte aligned base
// and row stride); the caller then takes another path.
inline bool encode_tensor_map_2d(CUtensorMap* map, CUtensorMapDataType dtype, const void* base,
                                 uint64_t inner, uint64_t outer, uint64_t row_bytes,
                                 uint32_t box_inner, uint32_t box_outer) {
  using EncodeFn =
      CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                   const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                   CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
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
  if (encode == nullptr || reinterpret_cast<uintptr_t>(base) % 16 != 0 || row_bytes % 16 != 0) {
    return false;
  }
  const cuuint64_t dims[2] = {inner, outer};
  const cuuint64_t strides[1] = {row_bytes};
  const cuuint32_t box[2] = {box_inner, box_outer};
  const cuuint32_t element_strides[2] = {1, 1};
  return encode(map, dtype, 2, const_cast<void*>(base), dims, strides, box, element_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace dsv4::kernels::cuda

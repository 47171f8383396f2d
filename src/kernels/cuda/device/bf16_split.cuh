// An f32 as three bf16 that sum to it exactly, x = hi + mid + lo, for the tensor-core linears
// (linear_tensor_cores.cu, linear_few_rows_tensor_cores.cu): hi = bf16(x), mid = bf16(x − hi),
// lo = x − hi − mid. An f32 has 24 significant bits and each part takes 8, and every difference
// is exact in f32, so a bf16 weight times each part is an exact product in the f32 accumulator.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "base/float_convert.h"

namespace dsv4::kernels::cuda {

// (a, b) as bf16x2 (a in the low half), leaving in a and b the exact f32 remainders
// a − bf16(a), b − bf16(b): called three times, it yields hi, mid and lo.
__device__ __forceinline__ uint32_t split_pair(float& a, float& b) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  const uint32_t bits = *reinterpret_cast<const uint32_t*>(&h);
  a -= float_from_bits(bits << 16);
  b -= float_from_bits(bits & 0xffff0000u);
  return bits;
}

}  // namespace dsv4::kernels::cuda

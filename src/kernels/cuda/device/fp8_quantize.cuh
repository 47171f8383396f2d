// Quantizing an activation to FP8 inside a kernel (kernels/ops.h, quantize_activation_fp8): one
// group of 128 columns of one row shares a power-of-two scale from the group's largest |x|, and
// each value becomes e4m3(x / scale). The quantizer kernel (ops/fp8_linear.cu) and the stream
// GEMM's own prologue (gemm/fp8/stream_kernel.cuh) both build on these functions, so the codes
// and scales they make are the same bytes, which are cpu::quantize_activation_fp8's: the scale
// comes from the same bits (kernels/fp8_scale.h), the max is exact and order-free, and
// cvt.rn.satfinite rounds to nearest even and saturates as float_to_e4m3 does.
//
// x / scale as x · (1 / scale). The scale is 2^e with e in [-22, 120] for any finite group (its
// ratio amax / 448 is at most 2^128 / 448 < 2^120), so 1 / scale = 2^-e is an exact normal f32,
// and x · 2^-e rounds the same real number the IEEE quotient rounds (no fast math: subnormal
// results are kept, as the CPU's are). A group holding ±inf has scale +inf: 1 / scale = +0, and
// both forms give ±0 for finite x and NaN for ±inf. One multiply a value instead of a division
// (about ten instructions) keeps the stream GEMM's prologue, where every CTA quantizes x, short.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/cuda/device/common.cuh"
#include "kernels/fp8_scale.h"

namespace dsv4::kernels::cuda {

// The reciprocal a group's values are multiplied by: exact (see above).
__device__ __forceinline__ float fp8_activation_inverse(float scale) { return 1.0f / scale; }

// The e4m3 code of v in a group whose scale's reciprocal is `inverse`.
__device__ __forceinline__ uint8_t fp8_activation_code(float v, float inverse) {
  return __nv_cvt_float_to_fp8(__fmul_rn(v, inverse), __NV_SATFINITE, __NV_E4M3);
}

// One group, columns [k0, k0 + 128) of `row`, quantized by one warp: lane l takes columns
// k0 + l + 32 i, i < 4 (coalesced loads; the group's max is a warp reduction). Columns at or
// past n_cols count as 0 and get code 0. Returns the group's scale to every lane; codes[i] is
// column k0 + l + 32 i's code.
__device__ __forceinline__ float fp8_quantize_group(const float* row, int64_t k0, int64_t n_cols,
                                                    uint8_t (&codes)[4]) {
  const int lane = threadIdx.x % 32;
  float v[4];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t k = k0 + lane + 32 * i;
    v[i] = k < n_cols ? row[k] : 0.0f;
    amax = fmaxf(amax, fabsf(v[i]));
  }
  amax = warp_reduce(amax, MaxOp());
  const float scale = fp8_activation_scale(amax), inverse = fp8_activation_inverse(scale);
#pragma unroll
  for (int i = 0; i < 4; ++i) codes[i] = fp8_activation_code(v[i], inverse);
  return scale;
}

}  // namespace dsv4::kernels::cuda

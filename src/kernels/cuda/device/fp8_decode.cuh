// Decoding an FP8 weight inside a kernel (format/fp8_block.h): e4m3 codes times their 128 × 128
// block's f32 scale. The loader keeps a weight in FP8 only when its scales are powers of two in
// the range where no scaled value leaves f32's normal range (checkpoint/fp8_weights.h), so each
// product is exact, is exactly a bf16, and is the f32 value the host's decode gives
// (checkpoint/decode.cpp): a kernel reading these codes computes with the bits of the widened
// weight it replaces. e4m3 → f16 by the hardware conversion is exact (f16 has the range and
// the bits), and f16 → f32 too.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "base/float_convert.h"

namespace dsv4::kernels::cuda {

// Codes 2i, 2i + 1 of a u16 (the lower byte first) as f32 values times `scale`.
__device__ __forceinline__ float2 e4m3x2_scaled(uint16_t codes, float scale) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(codes, __NV_E4M3);
  const float2 f = __half22float2(__half2(h));
  return make_float2(f.x * scale, f.y * scale);
}

// Four codes of a u32, the lowest byte first, as f32 values times `scale`.
__device__ __forceinline__ float4 e4m3x4_scaled(uint32_t codes, float scale) {
  const float2 lo = e4m3x2_scaled(static_cast<uint16_t>(codes & 0xffffu), scale);
  const float2 hi = e4m3x2_scaled(static_cast<uint16_t>(codes >> 16), scale);
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

// Two exact f32 values as the bf16 pair of an MMA operand (the first in the lower half):
// their upper halves, since both are bf16 already.
__device__ __forceinline__ uint32_t bf16_pair_of_exact(float a, float b) {
  return (float_bits(a) >> 16) | (float_bits(b) & 0xffff0000u);
}

// Eight codes (a u2, the lowest byte first) as eight bf16 in memory order: what 16 bytes of
// the widened bf16 weight would hold.
__device__ __forceinline__ uint4 e4m3x8_as_bf16(uint2 codes, float scale) {
  const float4 lo = e4m3x4_scaled(codes.x, scale), hi = e4m3x4_scaled(codes.y, scale);
  return make_uint4(bf16_pair_of_exact(lo.x, lo.y), bf16_pair_of_exact(lo.z, lo.w),
                    bf16_pair_of_exact(hi.x, hi.y), bf16_pair_of_exact(hi.z, hi.w));
}

}  // namespace dsv4::kernels::cuda

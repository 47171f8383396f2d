// E2M1 × UE4M3 -> bf16, exactly (nvfp4.md §3.3: every e2m1 · ue4m3 has ≤ 6 significant bits and
// lies in 2^-10 … 2688, so it is a bf16 and the bf16 multiply below never rounds).
//
// Four codes become two bf16x2 words with byte permutes instead of float math: the magnitude
// (3 bits) indexes an 8-entry table of the bf16's high bytes and another of its low bytes
// (prmt selects bytes by 3-bit index), and the sign bit is moved to bit 15 / 31 by one more
// permute. Then one bf16x2 multiply by the block scale.
#pragma once

#include <cstdint>

#include "kernels/cuda/device/ptx.cuh"

namespace dsv4::kernels::cuda::sm90 {

// A UE4M3 byte as bf16x2 (the value twice). Its 7 magnitude bits shifted into an fp32's
// exponent/mantissa give value · 2^-120 for normal and subnormal codes alike; · 2^120 is exact,
// and the result has ≤ 4 significant bits, so its top half is the bf16.
__device__ __forceinline__ uint32_t ue4m3_to_bf16x2(uint32_t scale_byte) {
  const float value = __uint_as_float((scale_byte & 0x7fu) << 20) * 0x1p120f;
  const uint32_t bf16 = __float_as_uint(value) >> 16;
  return bf16 | (bf16 << 16);
}

// Byte kByte of a word of four UE4M3 scales as bf16x2, like ue4m3_to_bf16x2 (the 7 magnitude
// bits land on fp32 bits 20..26 with one shift and one mask).
template <int kByte>
__device__ __forceinline__ uint32_t ue4m3_byte_to_bf16x2(uint32_t scales) {
  const uint32_t bits = (kByte <= 2 ? scales << (20 - 8 * kByte) : scales >> 4) & (0x7fu << 20);
  return prmt(__float_as_uint(__uint_as_float(bits) * 0x1p120f), 0, 0x3232u);
}

// Codes 0..3 of q (bits 0..15, code i in bits 4i..4i+3; bits 16..31 are ignored): out[0] holds
// elements 0 (low half) and 1 times scale01, out[1] elements 2 and 3 times scale23.
__device__ __forceinline__ void decode4(uint32_t q, uint32_t scale01, uint32_t scale23,
                                        uint32_t out[2]) {
  // bf16 of the magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6: high bytes 00 3f 3f 3f 40 40 40 40,
  // low bytes 00 00 80 c0 00 40 80 c0.
  const uint32_t magnitude = q & 0x7777u;
  const uint32_t hi = prmt(0x3f3f3f00u, 0x40404040u, magnitude);
  const uint32_t lo = prmt(0xc0800000u, 0xc0804000u, magnitude);
  // Sign of code 2j (bit 8j+3) is bit 7 of byte j of q << 4; of code 2j+1, bit 7 of byte j of q.
  const uint32_t shifted = q << 4;
  const uint32_t sign01 = prmt(shifted, q, 0x4000u) & 0x80008000u;
  const uint32_t sign23 = prmt(shifted, q, 0x5010u) & 0x80008000u;
  out[0] = bf16x2_mul(prmt(lo, hi, 0x5140u) | sign01, scale01);
  out[1] = bf16x2_mul(prmt(lo, hi, 0x7362u) | sign23, scale23);
}
__device__ __forceinline__ void decode4(uint32_t q, uint32_t scale_bf16x2, uint32_t out[2]) {
  decode4(q, scale_bf16x2, scale_bf16x2, out);
}

// Eight codes (a 32-bit word, code i in bits 4i..4i+3) sharing one scale -> four bf16x2 words.
__device__ __forceinline__ void decode8(uint32_t q, uint32_t scale_bf16x2, uint32_t out[4]) {
  decode4(q & 0xffffu, scale_bf16x2, out);
  decode4(q >> 16, scale_bf16x2, out + 2);
}

}  // namespace dsv4::kernels::cuda::sm90

// The register layout the decode-sized NVFP4 kernels (the fused MoE experts, the stream GEMM)
// compute in, and the NVFP4 decode that produces it. A 32-bit word of packed E2M1 holds 8
// consecutive K elements (element i in nibble i); the cheapest decode turns nibbles i and i+4
// into one bf16x2 register (one shift pair and two masks, no table), so the kernels pair K
// elements as (i, i+4) inside each group of 8. A dot product does not care in which order it
// visits K, as long as both operands use the same one: NVFP4 activations decode into the same
// pairs, and bf16 activations are written in (or permuted into) the "pair layout" below, where
// each 8-group is stored as e0 e4 e1 e5 e2 e6 e3 e7.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "base/float_convert.h"
#include "kernels/cuda/device/mma_sync.cuh"
#include "kernels/cuda/device/ptx.cuh"

namespace dsv4::kernels::cuda {

// Position of K element d in the pair layout.
__device__ __forceinline__ int pair_layout_index(int d) {
  return (d & ~7) | ((d & 3) << 1) | ((d >> 2) & 1);
}

// Nibbles p and p+4 of `word` as a bf16x2 whose values are e2m1 · 2^-126: the 3 magnitude bits
// (e1 e0 m) land on bf16 bits 8..6, the lowest exponent bits and the top mantissa bit, so
// exponent e ≥ 1 reads 2^(e-127)·(1 + m/2) and e = 0 is the subnormal m · 2^-127: both are the
// E2M1 value times 2^-126.
template <int kPair>
__device__ __forceinline__ uint32_t decode_e2m1_pair(uint32_t word) {
  const uint32_t v = word << (4 * (3 - kPair));
  return ((v >> 6) & 0x01C001C0u) | (v & 0x80008000u);
}

// 2^116 · ue4m3(scale) in both halves of a bf16x2 (exact: 4 significant bits, exponent ≤ 124).
// A decoded pair times this is e2m1 · ue4m3 · 2^-10, exact in bf16; kDecodeScaleLog2 undoes it.
// Built from the bits: a normal UE4M3 2^(e-7)·(1 + m/8) becomes bf16 exponent e + 236 and
// mantissa m << 4; a subnormal m·2^-9 goes through an exact int → float conversion.
inline constexpr int kDecodeScaleLog2 = 10;
__device__ __forceinline__ uint32_t scale_pair(uint32_t scale) {
  const uint32_t e = scale >> 3, m = scale & 7;
  const uint32_t normal = ((e + 236) << 7) | (m << 4);
  const uint32_t subnormal = __float_as_uint(__uint2float_rn(m) * 0x1p107f) >> 16;
  const uint32_t b = e != 0 ? normal : subnormal;
  return b | (b << 16);
}

// scale_pair for a scale byte with exponent ≥ 1 (byte kByte of `scales`): the bf16 bits of
// 2^116·2^(e-7)·(1 + m/8) are ((e + 236) << 7) | (m << 4) = (s << 4) + (236 << 7).
template <int kByte>
__device__ __forceinline__ uint32_t scale_pair_fast(uint32_t scales) {
  constexpr uint32_t kSelector = 0x4040u + kByte * 0x0101u;  // byte kByte into both halves
  return prmt(scales, 0u, kSelector) * 16u + 0x76007600u;
}

// The four UE4M3 scales of `scales` (bytes 0..3) as scale_pair values: one PRMT and one
// multiply-add each when every byte has exponent ≥ 1, else the exact general conversion, so
// the result is the same either way.
__device__ __forceinline__ void scale_pairs4(uint32_t x, uint32_t out[4]) {
  if (((x - 0x08080808u) & ~x & 0x80808080u) == 0) {  // no scale byte below 8
    out[0] = scale_pair_fast<0>(x), out[1] = scale_pair_fast<1>(x);
    out[2] = scale_pair_fast<2>(x), out[3] = scale_pair_fast<3>(x);
  } else {
    out[0] = scale_pair(x & 0xff), out[1] = scale_pair((x >> 8) & 0xff);
    out[2] = scale_pair((x >> 16) & 0xff), out[3] = scale_pair(x >> 24);
  }
}

// One packed word (8 elements) with its block scale as the four bf16x2 pairs (0,4) (1,5) (2,6)
// (3,7), each e2m1 · ue4m3 · 2^-10.
__device__ __forceinline__ void decode_word(uint32_t word, uint32_t scale2, uint32_t out[4]) {
  out[0] = bf16x2_mul(decode_e2m1_pair<0>(word), scale2);
  out[1] = bf16x2_mul(decode_e2m1_pair<1>(word), scale2);
  out[2] = bf16x2_mul(decode_e2m1_pair<2>(word), scale2);
  out[3] = bf16x2_mul(decode_e2m1_pair<3>(word), scale2);
}

// One lane's share of a 128-element K step of a 16-row m-tile: 16 packed bytes of each of its
// two rows (g and g + 8) and their block scales (lo 2c, lo 2c+1, hi 2c, hi 2c+1 in bytes 0..3).
struct StepWeights {
  uint4 lo, hi;
  uint32_t scales;
};

// acc[i] += packed word q of the lane's two rows (decoded with their bf16x2 block scales) times
// token chunk i's 8 elements b[i] in the pair layout: two m16n8k16 MMAs per live chunk.
template <int kChunks>
__device__ __forceinline__ void mma_packed_word(uint32_t lo_word, uint32_t hi_word,
                                                uint32_t lo_scale, uint32_t hi_scale,
                                                const uint4 (&b)[kChunks],
                                                const bool (&chunk_on)[kChunks],
                                                float (&acc)[kChunks][4]) {
  uint32_t lo[4], hi[4];
  decode_word(lo_word, lo_scale, lo);
  decode_word(hi_word, hi_scale, hi);
  const uint32_t a0[4] = {lo[0], hi[0], lo[1], hi[1]};
  const uint32_t a1[4] = {lo[2], hi[2], lo[3], hi[3]};
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    if (!chunk_on[i]) continue;
    mma_bf16_16816(acc[i], a0, b[i].x, b[i].y);
    mma_bf16_16816(acc[i], a1, b[i].z, b[i].w);
  }
}

// The step loop of the decode-size kernels, over a ring of weight steps (step_ring.cuh in
// gemm/nvfp4/): each of the ring's n_steps 128-element K steps is the lane's four packed words of
// its two rows, decoded with their block scales, times the token chunks, into acc.
// load_tokens(s, q, b) fills b[i] with token chunk i's 8 elements of packed word q in step s
// (pair layout); b[i] of a chunk that is off is never read. kConstSteps: n_steps when the caller
// knows it at compile time, else 0; when the stages divide it, no step checks the bound.
template <int kConstSteps, int kChunks, class Ring, class LoadTokens>
__device__ __forceinline__ void mma_weight_steps(Ring& ring, int n_steps,
                                                 const bool (&chunk_on)[kChunks],
                                                 const LoadTokens& load_tokens,
                                                 float (&acc)[kChunks][4]) {
  constexpr int kStages = Ring::kStages;
  const int steps = kConstSteps > 0 ? kConstSteps : n_steps;
  for (int s0 = 0; s0 < steps; s0 += kStages) {
#pragma unroll
    for (int d = 0; d < kStages; ++d) {
      const int s = s0 + d;
      if ((kConstSteps == 0 || kConstSteps % kStages != 0) && s >= steps) break;
      const StepWeights& w = ring.take(d, s);
      uint32_t sp[4];  // bf16x2 scales: lo block 0, lo 1, hi 0, hi 1
      scale_pairs4(w.scales, sp);
      const uint32_t lo_words[4] = {w.lo.x, w.lo.y, w.lo.z, w.lo.w};
      const uint32_t hi_words[4] = {w.hi.x, w.hi.y, w.hi.z, w.hi.w};
#pragma unroll
      for (int q = 0; q < 4; ++q) {  // packed word q: 8-group q, block scale q / 2
        uint4 b[kChunks];
        load_tokens(s, q, b);
        mma_packed_word(lo_words[q], hi_words[q], sp[q / 2], sp[2 + q / 2], b, chunk_on, acc);
      }
      ring.refill(d, s + kStages);
    }
  }
}

}  // namespace dsv4::kernels::cuda

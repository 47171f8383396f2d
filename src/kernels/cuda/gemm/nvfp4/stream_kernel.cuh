// nvfp4_stream_gemm_sm90: the dense NVFP4 GEMM at decode sizes (≤ kStreamMaxTokens rows, one
// matrix), written as a stream of the weights with nothing else in the way: one launch, no
// block-wide staging of the weights, no split-K atomics, no zeroed accumulator and no
// conversion pass (the small-M kernel needs all three, and at one token they cost more than
// the weights' bytes: docs/bench.md).
//
// Work. A CTA owns one 16-row m-tile of B and computes its outputs for every token; its
// kWarps warps split K into equal runs of 128-element steps, and their partial sums meet
// in shared memory, added in warp order (deterministic: no float atomics).
//
// Lane (g, c) = (lane / 4, lane % 4) of a warp owns rows g and g + 8 of the m-tile and, per
// step, the 32 elements [128 s + 32 c, +32) of each: 16 packed bytes and two block scales a
// row, the 4 lanes of a row reading 64 contiguous bytes, loaded ahead in each lane's own ring
// (step_ring.cuh: registers at one token chunk, shared memory at two). The decode and the MMA
// are the fused MoE kernel's (pair_layout.cuh: nibbles i and i+4 of a packed word become one
// bf16x2, exactly e2m1 · ue4m3 · 2^-10), so the token operand must come in the same (i, i+4)
// pair order: four byte permutes turn 8 consecutive bf16 of A's row into it. Tokens are the
// MMA's n8 columns, kChunks chunks of 8; a lane past the last token reads the chunk's first row
// instead (an output column depends only on its own token column, and those columns are never
// stored).
//
// Dimension letters: T tokens (rows of A and D), N rows of B, K.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/device/pair_layout.cuh"
#include "kernels/cuda/gemm/nvfp4/step_ring.cuh"
#include "kernels/cuda/gemm/nvfp4/config.h"
#include "kernels/cuda/gemm/nvfp4/params.h"

namespace dsv4::kernels::cuda::sm90 {

// 8 consecutive bf16 (e0 .. e7 in four words) in the pair layout e0 e4 e1 e5 e2 e6 e3 e7.
__device__ __forceinline__ uint4 to_pair_layout(uint4 v) {
  return make_uint4(prmt(v.x, v.z, 0x5410u), prmt(v.x, v.z, 0x7632u), prmt(v.y, v.w, 0x5410u),
                    prmt(v.y, v.w, 0x7632u));
}

// kK: K as a constant (a multiple of 128 · kWarps), or 0 for any multiple of 128. kWarps warps a
// CTA, at least kMinBlocks CTAs an SM (which caps the registers a thread).
template <int kK, int kChunks, bool kOutBf16, int kWarps, int kMinBlocks>
__global__ void __launch_bounds__(32 * kWarps, kMinBlocks)
    nvfp4_stream_gemm_sm90_kernel(const __grid_constant__ Nvfp4GemmParams p) {
  static_assert(kDecodeScaleLog2 == 10, "alpha below undoes 2^-10 per decoded operand");
  static_assert(kK % (kStreamStepK * kWarps) == 0, "whole steps for every warp");
  static_assert(kChunks >= 1 && 8 * kChunks <= kStreamMaxTokens, "token chunks of 8");
  static_assert(kStreamStepK == kRingStepK, "the weight ring's steps");
  __shared__ float partial[kWarps][kChunks][4][32];  // [warp][chunk][register][lane]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int k = kK > 0 ? kK : p.k;
  const int n_steps = k / kStreamStepK;
  const int step_begin = warp * n_steps / kWarps;
  const int count = kK > 0 ? kK / kStreamStepK / kWarps
                           : (warp + 1) * n_steps / kWarps - step_begin;
  const int row0 = blockIdx.x * 16 + g;  // rows row0 and row0 + 8; clamped rows are not stored
  const int64_t lo_row = min(row0, p.n - 1), hi_row = min(row0 + 8, p.n - 1);
  const uint8_t* w_lo = p.b_packed + lo_row * (k / 2) + step_begin * (kStreamStepK / 2) + c * 16;
  const uint8_t* w_hi = p.b_packed + hi_row * (k / 2) + step_begin * (kStreamStepK / 2) + c * 16;
  using WeightRing = StreamStepRing<kChunks, kWarps, kK / kStreamStepK / kWarps>;
  WeightRing ring({w_lo, w_hi, p.b_scale + lo_row * (k / 16) + step_begin * 8,
                   p.b_scale + hi_row * (k / 16) + step_begin * 8, count});
  // Token g of each chunk as a pointer to its 16-byte units at this warp's first step.
  const uint4* act[kChunks];
  bool chunk_on[kChunks];
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    chunk_on[i] = 8 * i < p.n_rows;  // warp-uniform
    const int64_t token = 8 * i + g < p.n_rows ? 8 * i + g : 8 * i;
    const uint16_t* row = p.a + token * p.lda + step_begin * kStreamStepK;
    act[i] = reinterpret_cast<const uint4*>(row) + c * 4;
  }

  float acc[kChunks][4] = {};
  // Captures copies: with references to act and chunk_on nvcc folds the token address into
  // 32 bits and ptxas spills 3 registers at K = 7168, 8 warps and 4 CTAs an SM.
  const auto load_tokens = [=](int j, int q, uint4 (&b)[kChunks]) {
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      if (chunk_on[i]) b[i] = to_pair_layout(__ldg(act[i] + j * (kStreamStepK / 8) + q));
    }
  };
  mma_weight_steps<kK / kStreamStepK / kWarps>(ring, count, chunk_on, load_tokens, acc);

#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
#pragma unroll
    for (int r = 0; r < 4; ++r) partial[warp][i][r][lane] = acc[i][r];
  }
  __syncthreads();
  if (warp != 0) return;
  float alpha = p.b_global[0];
  if (p.a_global != nullptr) alpha = __fmul_rn(p.a_global[0], alpha);
  alpha = __fmul_rn(alpha, 0x1p10f);
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {  // r: (row lo, hi) × (token 2c, 2c + 1) as in the C fragment
      const int token = 8 * i + 2 * c + r % 2, row = row0 + 8 * (r / 2);
      if (token >= p.n_rows || row >= p.n) continue;
      float sum = partial[0][i][r][lane];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) sum += partial[w][i][r][lane];
      const float out = alpha * sum;
      if constexpr (kOutBf16) {
        static_cast<__nv_bfloat16*>(p.d)[token * p.ldd + row] = __float2bfloat16_rn(out);
      } else {
        static_cast<float*>(p.d)[token * p.ldd + row] = out;
      }
    }
  }
}

}  // namespace dsv4::kernels::cuda::sm90

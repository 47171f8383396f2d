// Quantizing an activation to FP8 inside the kernel that makes it (kernels/ops.h, "FP8":
// quantize_activation_fp8 and the producers fused with it, rms_norm_fp8, swiglu_fp8,
// hc_pre_norm_fp8). Every kernel that quantizes builds on these functions, so their codes and
// scales are the same bytes, which are cpu::quantize_activation_fp8's: the scale comes from the
// same bits (kernels/fp8_scale.h), the max is exact and order-free (any split of a group gives
// the same one), the division is IEEE (no fast math), and the hardware's e4m3 conversion
// (cvt.rn.satfinite) rounds to nearest even and saturates as float_to_e4m3 does.
//
// Dimension letters: T tokens, K columns, Kb = ceil(K/128) groups of a row.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

#include "format/fp8_block.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/fp8_operands.h"
#include "kernels/fp8_scale.h"

namespace dsv4::kernels::cuda {

inline constexpr int kFp8Group = static_cast<int>(format::kFp8ActivationGroup);  // 128 columns

// Where a kernel writes its output rows quantized: an Fp8Activation's dense codes and scales.
struct Fp8Out {
  uint8_t* codes = nullptr;  // [T, K]
  float* scales = nullptr;   // [T, Kb]
  int64_t n_cols = 0;        // K

  __device__ uint8_t* row_codes(int64_t t) const { return codes + t * n_cols; }
  __device__ float* row_scales(int64_t t) const {
    return scales + t * ((n_cols + kFp8Group - 1) / kFp8Group);
  }
};

// The destination of y [T, K] quantized into out (checked against y as quantize_activation_fp8
// checks its operands).
inline Fp8Out fp8_out(const TensorView& y, const Fp8Activation& out) {
  const Fp8QuantizeOperands o = fp8_quantize_operands(y, out);
  return {const_cast<uint8_t*>(o.out.values), const_cast<float*>(o.out.scales), o.x.n_cols};
}

// The e4m3 code of v in a group of scale `scale`.
__device__ __forceinline__ uint8_t fp8_activation_code(float v, float scale) {
  return __nv_cvt_float_to_fp8(__fdiv_rn(v, scale), __NV_SATFINITE, __NV_E4M3);
}

// The largest of the values that kGroupThreads consecutive threads hold (the ones of one group
// of 128 columns), to each of them: a warp's shuffles up to 32 threads; a group of more threads
// must be the whole block (block_reduce). Every thread of the block calls it.
template <int kGroupThreads>
__device__ __forceinline__ float fp8_group_amax(float v) {
  static_assert(
      kGroupThreads > 0 && (kGroupThreads & (kGroupThreads - 1)) == 0 && kGroupThreads <= 1024,
      "a group's threads are a power of two");
  if constexpr (kGroupThreads > 32) {
    return block_reduce(v, MaxOp{});
  } else {
#pragma unroll
    for (int offset = 1; offset < kGroupThreads; offset *= 2) {
      v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    }
    return v;
  }
}

// One group held by a warp, lane l its columns k0 + l + 32 i, i < 4 (coalesced: the layout of
// quantize_activation_fp8's kernel), values past n_cols 0: the group's scale to *scale_at and
// each column's code to codes[k] (k < n_cols). Every lane of the warp calls it.
__device__ __forceinline__ void fp8_store_warp_group(const float (&v)[4], int64_t k0,
                                                     int64_t n_cols, uint8_t* codes,
                                                     float* scale_at) {
  const int lane = threadIdx.x % 32;
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) amax = fmaxf(amax, fabsf(v[i]));
  const float scale = fp8_activation_scale(fp8_group_amax<32>(amax));
  if (lane == 0) *scale_at = scale;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t k = k0 + lane + 32 * i;
    if (k < n_cols) codes[k] = fp8_activation_code(v[i], scale);
  }
}

// A row held in registers (RegisterRow: lanes [first_lane, first_lane + kLanes) of
// kRmsNormLanes a thread), quantized as rms_norm stores it normed (row.normed, the same f32
// values): codes [n] to `codes`, scales [ceil(n/128)] to `scales`. A pass's 128 lanes are one
// group, held by 128 / kLanes consecutive threads: a warp for block_row's four lanes a thread,
// the whole block for cluster_row's one. Every thread of the block calls it.
template <int kLanes, int kPasses>
__device__ void store_normed_fp8(const RegisterRow<kLanes, kPasses>& row, float inv_rms,
                                 uint8_t* codes, float* scales) {
  static_assert(kFp8Group % kLanes == 0 && kRmsNormLanes % kFp8Group == 0,
                "a pass's lanes split into whole groups");
  constexpr int kGroupThreads = kFp8Group / kLanes;
#pragma unroll
  for (int p = 0; p < kPasses; ++p) {
    float y[kLanes];
    float amax = 0.0f;
#pragma unroll
    for (int l = 0; l < kLanes; ++l) {
      y[l] = row.holds(p, l) ? row.normed(p, l, inv_rms) : 0.0f;
      amax = fmaxf(amax, fabsf(y[l]));
    }
    const float scale = fp8_activation_scale(fp8_group_amax<kGroupThreads>(amax));
    const int64_t first = row.index(p, 0);
    if (first % kFp8Group == 0 && first < row.n) scales[first / kFp8Group] = scale;
#pragma unroll
    for (int l = 0; l < kLanes; ++l) {
      if (row.holds(p, l)) codes[row.index(p, l)] = fp8_activation_code(y[l], scale);
    }
  }
}

}  // namespace dsv4::kernels::cuda

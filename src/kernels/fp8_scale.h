// The scale of one 1 × 128 activation group (kernels/ops.h, quantize_activation_fp8), written
// once for the CPU reference and the CUDA kernel so both derive it from the same bits.
#pragma once

#include <cstdint>
#include <cstring>

#include "base/float_convert.h"

namespace dsv4::kernels {

inline constexpr float kFp8ActivationAmaxFloor = 1e-4f;  // act_quant's floor on a group's amax

// 2^ceil(log2(max(amax, 1e-4) · f32(1/448))), as V4's fast_round_scale computes it: one f32
// multiply, then the exponent field plus one unless the mantissa is zero. For a finite amax the
// product is a normal f32 (≥ 1e-4 / 448 ≈ 2^-22), so this is the exact ceiling of its log2.
DSV4_HOST_DEVICE inline float fp8_activation_scale(float amax) {
  const float ratio =
      (amax > kFp8ActivationAmaxFloor ? amax : kFp8ActivationAmaxFloor) * (1.0f / 448.0f);
  uint32_t bits;
  std::memcpy(&bits, &ratio, sizeof bits);
  const uint32_t exponent = ((bits >> 23) & 0xffu) + ((bits & 0x7fffffu) != 0 ? 1u : 0u);
  const uint32_t scale_bits = (exponent > 0xfeu ? 0xffu : exponent) << 23;  // +inf past 2^127
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return scale;
}

}  // namespace dsv4::kernels

// Scalar conversions between float and the narrow formats DeepSeek-V4 checkpoints use:
// bf16, fp16, fp8 e4m3 (also the unsigned UE4M3 NVFP4 block scale), e8m0 (power-of-two scales)
// and e2m1 (FP4 elements). Host and device: the CPU reference and the CUDA kernels must round
// identically, so both include this one definition. Encoders round to nearest, ties to even,
// and saturate (nvfp4.md §1.5): e4m3 to ±448, e2m1 to ±6.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define DSV4_HOST_DEVICE __host__ __device__
#else
#define DSV4_HOST_DEVICE
#endif

namespace dsv4 {

DSV4_HOST_DEVICE inline uint32_t float_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

DSV4_HOST_DEVICE inline float float_from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// ---- bf16: the upper half of a float ----
DSV4_HOST_DEVICE inline float bf16_to_float(uint16_t b) { return float_from_bits(uint32_t{b} << 16); }

DSV4_HOST_DEVICE inline uint16_t float_to_bf16(float x) {
  uint32_t u = float_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even on the dropped 16 bits
  return static_cast<uint16_t>(u >> 16);
}

DSV4_HOST_DEVICE inline float round_to_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

// ---- fp16 (IEEE half): decode only; checkpoints may hold it, the engine computes in fp32 ----
DSV4_HOST_DEVICE inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  float magnitude;
  if (exp == 0) {
    magnitude = std::ldexp(static_cast<float>(man), -24);  // subnormal: man · 2^-24
  } else if (exp == 31) {
    magnitude = man ? NAN : INFINITY;
  } else {
    magnitude = std::ldexp(1.0f + static_cast<float>(man) / 1024.0f, static_cast<int>(exp) - 15);
  }
  return sign ? -magnitude : magnitude;
}

// ---- fp8 e4m3 ("fn": bias 7, no infinities, 0x7f/0xff are NaN, max 448) ----
DSV4_HOST_DEVICE inline float e4m3_to_float(uint8_t b) {
  const uint32_t sign = b >> 7, exp = (b >> 3) & 0xfu, man = b & 0x7u;
  float magnitude;
  if (exp == 15 && man == 7) {
    magnitude = NAN;
  } else if (exp == 0) {
    magnitude = std::ldexp(static_cast<float>(man), -9);  // subnormal: man/8 · 2^-6
  } else {
    magnitude = std::ldexp(1.0f + static_cast<float>(man) / 8.0f, static_cast<int>(exp) - 7);
  }
  return sign ? -magnitude : magnitude;
}

// Round to nearest even, saturating to ±448; NaN stays NaN (0x7f).
DSV4_HOST_DEVICE inline uint8_t float_to_e4m3(float x) {
  if (std::isnan(x)) return 0x7f;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= 448.0f) return sign | 0x7e;
  if (a < 0.015625f) {  // below 2^-6: subnormal grid of 2^-9 (code == multiple of 2^-9, up to 8)
    return sign | static_cast<uint8_t>(std::rint(std::ldexp(a, 9)));
  }
  int e;
  std::frexp(a, &e);  // a = f · 2^e, f in [0.5, 1): leading bit at 2^(e-1)
  const int exponent = e - 1;
  int q = static_cast<int>(std::rint(std::ldexp(a, 3 - exponent)));  // in [8, 16]
  int biased = exponent + 7;
  if (q == 16) {
    q = 8;
    ++biased;
  }
  if (biased > 15 || (biased == 15 && q - 8 > 6)) return sign | 0x7e;  // rounded past 448
  return sign | static_cast<uint8_t>((biased << 3) | (q - 8));
}

// ---- e8m0: an unsigned power of two 2^(b-127); 0xff is NaN ----
DSV4_HOST_DEVICE inline float e8m0_to_float(uint8_t b) {
  if (b == 0xff) return NAN;
  return std::ldexp(1.0f, static_cast<int>(b) - 127);
}

// ---- e2m1 (FP4): sign, 2 exponent bits (bias 1), 1 mantissa bit; ±{0,.5,1,1.5,2,3,4,6} ----
DSV4_HOST_DEVICE inline float e2m1_to_float(uint8_t code) {
  constexpr float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float m = kMagnitude[code & 0x7u];
  return (code & 0x8u) ? -m : m;
}

// Round to nearest, ties to the even code (even mantissa bit), saturating to ±6. The thresholds
// are the midpoints of the grid; `<=` where the lower neighbour is even, `<` where the upper is.
// NaN encodes as +0: E2M1 has no NaN, and a NaN block is caught by its scale (nvfp4.md §1.5).
DSV4_HOST_DEVICE inline uint8_t float_to_e2m1(float x) {
  if (std::isnan(x)) return 0;
  const uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
  const float a = std::fabs(x);
  uint8_t code;
  if (a <= 0.25f) code = 0;
  else if (a < 0.75f) code = 1;
  else if (a <= 1.25f) code = 2;
  else if (a < 1.75f) code = 3;
  else if (a <= 2.5f) code = 4;
  else if (a < 3.5f) code = 5;
  else if (a <= 5.0f) code = 6;
  else code = 7;
  return sign | code;
}

}  // namespace dsv4

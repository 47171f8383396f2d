// FP8 weights for tests (format/fp8_block.h): e4m3 codes with power-of-two 128 × 128 block
// scales, as an FP8 checkpoint stores them, with their decoded f32 values (e4m3 · scale, the
// loader's decode) beside them, drawn at random or rounded from given f32 values.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "base/float_convert.h"
#include "format/fp8_block.h"
#include "testing/random.h"

namespace dsv4::testing {

struct Fp8Weight {
  int64_t n = 0, k = 0;
  std::vector<uint8_t> codes;  // [n, k]
  std::vector<float> scales;   // [ceil(n/128), ceil(k/128)]
  std::vector<float> decoded;  // [n, k] codes[i] · its block's scale

  int64_t scale_cols() const { return (k + format::kFp8WeightBlock - 1) / format::kFp8WeightBlock; }
  float scale_of(int64_t row, int64_t col) const {
    return scales[row / format::kFp8WeightBlock * scale_cols() + col / format::kFp8WeightBlock];
  }
  void decode() {
    decoded.resize(codes.size());
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < k; ++c) {
        decoded[r * k + c] = e4m3_to_float(codes[r * k + c]) * scale_of(r, c);
      }
    }
  }
  // A host view of the codes and scales.
  format::Fp8BlockView view() const { return {codes.data(), scales.data(), n, k, k, Device::kCpu}; }
};

inline Fp8Weight empty_fp8_weight(int64_t n, int64_t k) {
  Fp8Weight w;
  w.n = n, w.k = k;
  w.codes.resize(static_cast<size_t>(n * k));
  w.scales.resize(static_cast<size_t>((n + format::kFp8WeightBlock - 1) / format::kFp8WeightBlock *
                                      w.scale_cols()));
  return w;
}

// Random finite codes (every e4m3 but NaN, zero included) and scales 2^-12 .. 2^-4.
inline Fp8Weight random_fp8_weight(SeededRng& rng, int64_t n, int64_t k) {
  Fp8Weight w = empty_fp8_weight(n, k);
  for (uint8_t& c : w.codes) {
    do c = static_cast<uint8_t>(rng.uniform_int(0, 255));
    while ((c & 0x7f) == 0x7f);
  }
  for (float& s : w.scales) s = std::ldexp(1.0f, static_cast<int>(rng.uniform_int(-12, -4)));
  w.decode();
  return w;
}

// `values` [n, k] rounded to e4m3 with DeepSeek's weight rule: each block's scale the power of
// two 2^ceil(log2(amax / 448)) (2^0 for an all-zero block), so the block's largest value fits.
inline Fp8Weight fp8_weight_of(const float* values, int64_t n, int64_t k) {
  Fp8Weight w = empty_fp8_weight(n, k);
  const int64_t b = format::kFp8WeightBlock;
  for (int64_t br = 0; br * b < n; ++br) {
    for (int64_t bc = 0; bc * b < k; ++bc) {
      float amax = 0.0f;
      for (int64_t r = br * b; r < std::min(n, (br + 1) * b); ++r) {
        for (int64_t c = bc * b; c < std::min(k, (bc + 1) * b); ++c) {
          amax = std::max(amax, std::fabs(values[r * k + c]));
        }
      }
      const float scale =
          amax > 0.0f ? std::ldexp(1.0f, static_cast<int>(std::ceil(std::log2(amax / 448.0f))))
                      : 1.0f;
      w.scales[br * w.scale_cols() + bc] = scale;
      for (int64_t r = br * b; r < std::min(n, (br + 1) * b); ++r) {
        for (int64_t c = bc * b; c < std::min(k, (bc + 1) * b); ++c) {
          w.codes[r * k + c] = float_to_e4m3(values[r * k + c] / scale);
        }
      }
    }
  }
  w.decode();
  return w;
}

}  // namespace dsv4::testing

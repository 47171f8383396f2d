// An independent NVFP4 quantizer for the tests: the documented encode arithmetic
// (docs/nvfp4.md, "staging arithmetic") re-implemented in float64 with brute-force
// nearest-even grid searches instead of float_convert.h's threshold and bit logic. Each fp32
// step of the contract is emulated as "exact in double, then one rounding to float": a product
// of two floats is exact in double, and a quotient rounded twice (53 then 24 bits) equals the
// correctly rounded one because 53 >= 2·24 + 2. So the codes and scales must agree bit for bit.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace dsv4::testing {

// The non-negative values of E2M1 (8 codes) and of E4M3 (codes 0..126; 0x7f is NaN).
inline const std::vector<double>& e2m1_grid() {
  static const std::vector<double> grid = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  return grid;
}
inline const std::vector<double>& ue4m3_grid() {
  static const std::vector<double> grid = [] {
    std::vector<double> g;
    for (int code = 0; code < 0x7f; ++code) {
      const int exp = code >> 3, man = code & 7;
      g.push_back(exp == 0 ? std::ldexp(man, -9) : std::ldexp(8 + man, exp - 10));
    }
    return g;
  }();
  return grid;
}

// Nearest code to |x| with ties to the even code; saturates at the top of the grid.
inline int nearest_even_code(const std::vector<double>& grid, double magnitude) {
  int best = 0;
  for (int code = 1; code < static_cast<int>(grid.size()); ++code) {
    const double d = std::fabs(grid[code] - magnitude), d_best = std::fabs(grid[best] - magnitude);
    if (d < d_best || (d == d_best && code % 2 == 0)) best = code;
  }
  return best;
}

struct ReferenceBlock {
  uint8_t scale = 0;
  uint8_t codes[16] = {};  // one E2M1 code per element (unpacked)
};

// One block of 16 with encode scale `encode`, following the contract step by step.
inline ReferenceBlock reference_quantize_block(const float* x, float encode) {
  double amax = 0;
  for (int i = 0; i < 16; ++i) amax = std::fmax(amax, std::fabs(double(x[i])));
  const float scaled_amax = static_cast<float>(amax * double(encode));      // fp32 multiply
  const float scale_input = static_cast<float>(double(scaled_amax) / 6.0);  // fp32 divide
  ReferenceBlock block;
  block.scale = static_cast<uint8_t>(nearest_even_code(ue4m3_grid(), scale_input));
  const double scale_value = ue4m3_grid()[block.scale];
  const float mult = block.scale == 0 ? 0.0f : static_cast<float>(double(encode) / scale_value);
  for (int i = 0; i < 16; ++i) {
    const double v = static_cast<float>(double(x[i]) * double(mult));  // fp32 multiply
    const int magnitude = nearest_even_code(e2m1_grid(), std::fabs(v));
    block.codes[i] = static_cast<uint8_t>((std::signbit(v) ? 8 : 0) | magnitude);
  }
  return block;
}

// The value a code and scale stand for, before the global scale.
inline double reference_value(uint8_t code, uint8_t scale) {
  const double m = e2m1_grid()[code & 7] * ue4m3_grid()[scale];
  return (code & 8) ? -m : m;
}

}  // namespace dsv4::testing

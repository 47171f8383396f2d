// Codecs against independent references: every code of the narrow formats decodes to the value
// its bit fields define, and encoding is checked against a brute-force nearest search in
// float64 (ties to the even code), so the encoders' threshold logic is not tested against itself.
#include "base/float_convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace dsv4 {
namespace {

// All finite non-negative values of a format, indexed by code.
std::vector<double> e4m3_grid() {
  std::vector<double> grid;
  for (int code = 0; code < 0x7f; ++code) {  // 0x7f is NaN
    const int exp = code >> 3, man = code & 7;
    grid.push_back(exp == 0 ? man / 8.0 * std::ldexp(1.0, -6)
                            : (1 + man / 8.0) * std::ldexp(1.0, exp - 7));
  }
  return grid;
}

// Nearest grid code to |x| with ties to the even code; saturates at the top of the grid.
int nearest_code(const std::vector<double>& grid, double x) {
  int best = 0;
  for (int code = 1; code < static_cast<int>(grid.size()); ++code) {
    const double d = std::fabs(grid[code] - x), d_best = std::fabs(grid[best] - x);
    if (d < d_best || (d == d_best && code % 2 == 0)) best = code;
  }
  return best;
}

TEST(FloatConvertTest, E4m3DecodesEveryCode) {
  const std::vector<double> grid = e4m3_grid();
  for (int code = 0; code < 256; ++code) {
    const float v = e4m3_to_float(static_cast<uint8_t>(code));
    if ((code & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(v)) << code;
      continue;
    }
    const double expected = (code & 0x80 ? -1 : 1) * grid[code & 0x7f];
    EXPECT_EQ(v, expected) << "code " << code;
    EXPECT_EQ(float_to_e4m3(v), code == 0x80 ? 0x80 : code) << "round trip of code " << code;
  }
  EXPECT_EQ(e4m3_to_float(0x7e), 448.0f);
}

TEST(FloatConvertTest, E4m3EncodeMatchesNearestEvenSearch) {
  const std::vector<double> grid = e4m3_grid();
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> log_mag(-12.0, 9.5);
  for (int i = 0; i < 20000; ++i) {
    const float x = static_cast<float>(std::exp2(log_mag(rng)));
    EXPECT_EQ(float_to_e4m3(x), nearest_code(grid, x)) << x;
    EXPECT_EQ(float_to_e4m3(-x), 0x80 | nearest_code(grid, x)) << -x;
  }
  // Midpoints between neighbours are ties: they go to the even code.
  for (size_t code = 0; code + 1 < grid.size(); ++code) {
    const float mid = static_cast<float>((grid[code] + grid[code + 1]) / 2);
    EXPECT_EQ(float_to_e4m3(mid), code % 2 == 0 ? code : code + 1) << mid;
  }
  EXPECT_EQ(float_to_e4m3(1e6f), 0x7e);  // saturates, no infinity
  EXPECT_EQ(float_to_e4m3(-1e6f), 0xfe);
}

TEST(FloatConvertTest, E2m1EncodeMatchesNearestEvenSearch) {
  const std::vector<double> grid = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (int code = 0; code < 16; ++code) {
    const float v = e2m1_to_float(static_cast<uint8_t>(code));
    EXPECT_EQ(v, (code & 8 ? -1 : 1) * grid[code & 7]);
    if (code != 8) {
      EXPECT_EQ(float_to_e2m1(v), code);
    }
  }
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<double> mag(0.0, 8.0);
  for (int i = 0; i < 20000; ++i) {
    const float x = static_cast<float>(mag(rng));
    EXPECT_EQ(float_to_e2m1(x), nearest_code(grid, x)) << x;
  }
  for (size_t code = 0; code + 1 < grid.size(); ++code) {
    const float mid = static_cast<float>((grid[code] + grid[code + 1]) / 2);
    EXPECT_EQ(float_to_e2m1(mid), code % 2 == 0 ? code : code + 1) << mid;
  }
}

TEST(FloatConvertTest, Bf16RoundsToNearestEven) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<uint32_t> bits(0, 0x7f7fffffu);
  for (int i = 0; i < 20000; ++i) {
    const float x = float_from_bits(bits(rng));
    const float lo = float_from_bits(float_bits(x) & 0xffff0000u);
    const float hi = float_from_bits((float_bits(x) & 0xffff0000u) + 0x10000u);
    // Above the largest bf16 the next grid point is 2^128 (IEEE rounds to it, then overflows to
    // infinity), so the distance is taken to 2^128, not to the infinity `hi` holds.
    const double hi_value = std::isinf(hi) ? std::ldexp(1.0, 128) : double(hi);
    const double d_lo = double(x) - lo, d_hi = hi_value - x;
    const bool lo_even = ((float_bits(lo) >> 16) & 1u) == 0;
    const float expected = d_lo < d_hi ? lo : d_hi < d_lo ? hi : (lo_even ? lo : hi);
    EXPECT_EQ(round_to_bf16(x), expected) << x;
  }
  EXPECT_TRUE(std::isnan(round_to_bf16(NAN)));
  EXPECT_TRUE(std::isinf(round_to_bf16(float_from_bits(0x7f7f8000u))));  // tie at the top: to inf
  EXPECT_EQ(float_bits(round_to_bf16(float_from_bits(0x7f7f7fffu))), 0x7f7f0000u);
}

TEST(FloatConvertTest, E8m0AndFp16Decode) {
  EXPECT_EQ(e8m0_to_float(127), 1.0f);
  EXPECT_EQ(e8m0_to_float(120), 1.0f / 128);
  EXPECT_TRUE(std::isnan(e8m0_to_float(0xff)));
  EXPECT_EQ(fp16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_float(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(fp16_to_float(0x7c00)));
}

// nvfp4.md §1.5: saturating ("satfinite") encoders map overflow and ±inf to ±max, NaN is the
// E4M3 NaN code and E2M1's documented 0 (it has no NaN); signed zeros keep their sign bit; a
// block scale underflows to code 0 below half the smallest subnormal (a tie at exactly half).
TEST(FloatConvertTest, NonFiniteZeroAndUnderflowFollowTheNvfp4Contract) {
  EXPECT_EQ(float_to_e4m3(NAN), 0x7f);
  EXPECT_EQ(float_to_e4m3(INFINITY), 0x7e);
  EXPECT_EQ(float_to_e4m3(-INFINITY), 0xfe);
  EXPECT_EQ(float_to_e4m3(464.0f), 0x7e);  // past 448 the grid has no 480: saturate, never NaN
  EXPECT_EQ(float_to_e4m3(0.0f), 0x00);
  EXPECT_EQ(float_to_e4m3(-0.0f), 0x80);
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -10)), 0x00);  // tie between 0 and 2^-9: even (0)
  EXPECT_EQ(float_to_e4m3(std::nextafter(std::ldexp(1.0f, -10), 1.0f)), 0x01);
  EXPECT_EQ(float_to_e4m3(std::ldexp(3.0f, -10)), 0x02);  // tie between codes 1 and 2: even
  EXPECT_EQ(e4m3_to_float(0x80), 0.0f);
  EXPECT_TRUE(std::signbit(e4m3_to_float(0x80)));

  EXPECT_EQ(float_to_e2m1(NAN), 0x0);
  EXPECT_EQ(float_to_e2m1(INFINITY), 0x7);
  EXPECT_EQ(float_to_e2m1(-INFINITY), 0xf);
  EXPECT_EQ(float_to_e2m1(-0.0f), 0x8);
  EXPECT_EQ(float_to_e2m1(-0.25f), 0x8);  // rounds to -0: the sign survives, the value is 0
  EXPECT_EQ(e2m1_to_float(0x8), 0.0f);
  EXPECT_EQ(float_to_e2m1(1e30f), 0x7);
  EXPECT_EQ(float_to_e2m1(-6.5f), 0xf);
}

}  // namespace
}  // namespace dsv4

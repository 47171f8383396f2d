// The FP8 linear's CPU reference (kernels/ops.h, "FP8"): the activation quantizer against cases
// derived by hand from V4's act_quant (ue8m0 scales), and properties every group must have; the
// GEMM against a float64 evaluation of the same quantized operands (kFp8LinearCpuSumRelTol), and
// its block-diagonal form against the plain GEMM of each group.
//
// Dimension letters: T tokens, N output features, K input features, Kb = ceil(K/128).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "base/buffer.h"
#include "base/float_convert.h"
#include "fp8_linear_case.h"
#include "kernels/ops.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4::kernels {
namespace {

using testing::fp8_group_count;
using testing::SeededRng;

// Two rows of 130 columns: two groups each, the second two columns wide.
TEST(QuantizeActivationFp8, HandDerivedCases) {
  Tensor x = Tensor::host(DType::kF32, {2, 130});
  float* r0 = x.data_as<float>();
  float* r1 = r0 + 130;
  for (int k = 0; k < 260; ++k) r0[k] = 0.0f;
  // Row 0, group 0: amax 448, and 448 · f32(1/448) rounds to exactly 1, so s = 2^0.
  r0[0] = 448.0f;
  r0[1] = -1.0f;
  r0[2] = 0.5f;
  r0[3] = 8.5f;                          // halfway between 8 and 9: the even code, 8
  r0[4] = 9.5f;                          // halfway between 9 and 10: 10
  r0[5] = std::ldexp(1.0f, -9);          // the least subnormal
  r0[6] = 3.0f * std::ldexp(1.0f, -10);  // halfway between subnormals 1 and 2: 2
  // Row 0, group 1: amax 1; f32(1/448) = 1.1428…·2^-9, whose log2 rounds up to -8: s = 2^-8.
  r0[128] = 1.0f;  // 256
  r0[129] = 0.3f;  // 76.8 -> 80 on [64, 128)'s grid of 8
  // Row 1, group 0: all zero, so amax is act_quant's floor 1e-4: 2.23e-7 -> s = 2^-22.
  // Row 1, group 1: amax 3.5 (a negative value), 3.5 · f32(1/448) = 2^-7 exactly: s = 2^-7.
  r1[128] = -3.5f;  // -448
  r1[129] = 1.0f;   // 128

  testing::Fp8Storage out = testing::fp8_host_storage(2, 130);
  ASSERT_TRUE(quantize_activation_fp8(x.view(), out.view()).ok());
  const float* s = out.scales.data_as<float>();
  EXPECT_EQ(s[0], 1.0f);
  EXPECT_EQ(s[1], std::ldexp(1.0f, -8));
  EXPECT_EQ(s[2], std::ldexp(1.0f, -22));
  EXPECT_EQ(s[3], std::ldexp(1.0f, -7));
  const uint8_t* q = out.values.data_as<uint8_t>();
  const std::vector<std::pair<int, uint8_t>> expected = {
      {0, 0x7e},    // 448 = 1.75 · 2^8
      {1, 0xb8},    // -1
      {2, 0x30},    // 0.5
      {3, 0x50},    // 8
      {4, 0x52},    // 10
      {5, 0x01},    // 2^-9
      {6, 0x02},    // 2 · 2^-9
      {7, 0x00},    // 0
      {128, 0x78},  // 256 = 2^8
      {129, 0x6a},  // 80 = 1.25 · 2^6
      {130, 0x00},  // row 1: zeros stay zero under the floor's scale
      {258, 0xfe},  // -448
      {259, 0x70},  // 128 = 2^7
  };
  for (const auto& [index, code] : expected) {
    EXPECT_EQ(q[index], code) << "element " << index;
  }
}

// Every group of a random activation: s a power of two, the smallest that holds the group
// (amax / s in (224, 448]), and each code the nearest e4m3 to x / s.
TEST(QuantizeActivationFp8, ScalesAreTheSmallestPowerOfTwoThatFits) {
  SeededRng rng;
  const int64_t n_rows = 5, n_cols = 1000;
  Tensor x = testing::fp8_random_activation(rng, n_rows, n_cols);
  testing::Fp8Storage out = testing::fp8_host_storage(n_rows, n_cols);
  ASSERT_TRUE(quantize_activation_fp8(x.view(), out.view()).ok());
  const int64_t n_groups = fp8_group_count(n_cols);
  for (int64_t t = 0; t < n_rows; ++t) {
    for (int64_t j = 0; j < n_groups; ++j) {
      const float s = out.scales.data_as<float>()[t * n_groups + j];
      int exponent;
      ASSERT_EQ(std::frexp(s, &exponent), 0.5f) << "scale " << s << " is not a power of two";
      double amax = 0.0;
      for (int64_t k = j * 128; k < std::min(n_cols, (j + 1) * 128); ++k) {
        const float v = x.data_as<float>()[t * n_cols + k];
        amax = std::max(amax, std::fabs(double{v}));
        const float decoded = e4m3_to_float(out.values.data_as<uint8_t>()[t * n_cols + k]);
        const double exact = double{v} / s;
        // Nearest on e4m3's grid: off by at most half the grid step at |exact| (2^-4 relative
        // for normals, 2^-10 absolute for subnormals).
        const double step = std::fabs(exact) < 0.015625 ? std::ldexp(1.0, -9)
                                                        : std::ldexp(1.0, std::ilogb(exact) - 3);
        EXPECT_LE(std::fabs(decoded - exact), step / 2) << "t " << t << " k " << k;
      }
      EXPECT_GT(amax / s, 224.0);
      EXPECT_LE(amax / s, 448.0);
    }
  }
}

struct Fp8Shape {
  int64_t n_rows, n_cols, k, row_stride;
};

class LinearFp8 : public ::testing::TestWithParam<Fp8Shape> {};

// The CPU GEMM against float64 on the same codes and scales, with a strided weight and y.
TEST_P(LinearFp8, MatchesFloat64) {
  const Fp8Shape shape = GetParam();
  SeededRng rng;
  Tensor x = testing::fp8_random_activation(rng, shape.n_rows, shape.k);
  testing::Fp8Storage a = testing::fp8_host_storage(shape.n_rows, shape.k);
  ASSERT_TRUE(quantize_activation_fp8(x.view(), a.view()).ok());
  const testing::Fp8RandomWeight w =
      testing::fp8_random_weight(rng, shape.n_cols, shape.k, shape.row_stride);
  const int64_t y_stride = shape.n_cols + 3;
  Tensor y_storage = Tensor::host(DType::kF32, {shape.n_rows, y_stride});
  TensorView y = y_storage.view();
  y.shape = {shape.n_rows, shape.n_cols};
  ASSERT_TRUE(linear_fp8(a.view(), w.view(w.values, w.scales), y).ok());
  const testing::Fp8Reference ref = testing::fp8_reference(
      a.values.data_as<uint8_t>(), a.scales.data_as<float>(), shape.n_rows, w);
  EXPECT_LE(testing::fp8_sum_rel_error(y_storage.data_as<float>(), y_stride, ref, shape.n_rows,
                                       shape.n_cols),
            testing::kFp8LinearCpuSumRelTol);

  // The convenience op is the two steps, bit for bit.
  testing::Fp8Storage scratch = testing::fp8_host_storage(shape.n_rows, shape.k);
  Tensor y2 = Tensor::host(DType::kF32, {shape.n_rows, shape.n_cols});
  ASSERT_TRUE(linear_fp8(x.view(), w.view(w.values, w.scales), scratch.view(), y2.view()).ok());
  for (int64_t t = 0; t < shape.n_rows; ++t) {
    for (int64_t n = 0; n < shape.n_cols; ++n) {
      ASSERT_EQ(float_bits(y2.data_as<float>()[t * shape.n_cols + n]),
                float_bits(y_storage.data_as<float>()[t * y_stride + n]));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearFp8,
                         ::testing::Values(Fp8Shape{1, 128, 128, 128},  // one block
                                           Fp8Shape{3, 200, 300, 304},  // N, K off the blocks
                                           Fp8Shape{7, 256, 512, 512},  // several blocks
                                           Fp8Shape{2, 130, 16, 32}));  // K under one group

// The block-diagonal form (wo_a's): each group's columns of y have the bits of linear_fp8 on
// that group's operands, and so stay within the float64 bound; y's padding stays untouched.
TEST(BlockDiagonalLinearFp8, EachGroupIsLinearFp8BitForBit) {
  struct Case {
    int64_t t, n_groups, r, k, row_stride;
  };
  for (const Case c :
       {Case{1, 1, 128, 128, 128}, Case{3, 3, 128, 256, 272}, Case{5, 2, 256, 384, 384}}) {
    SCOPED_TRACE("T=" + std::to_string(c.t) + " G=" + std::to_string(c.n_groups));
    SeededRng rng;
    const Tensor x = testing::fp8_random_activation(rng, c.t, c.n_groups * c.k);
    testing::Fp8Storage a = testing::fp8_host_storage(c.t, c.n_groups * c.k);
    ASSERT_TRUE(quantize_activation_fp8(x.view(), a.view()).ok());
    const testing::Fp8RandomWeight w =
        testing::fp8_random_weight(rng, c.n_groups * c.r, c.k, c.row_stride);
    const int64_t n = c.n_groups * c.r, y_stride = n + 2;
    Tensor y_storage = Tensor::host(DType::kF32, {c.t, y_stride});
    for (int64_t i = 0; i < c.t * y_stride; ++i) y_storage.data_as<float>()[i] = -1.0f;
    TensorView y = y_storage.view();
    y.shape = {c.t, n};
    ASSERT_TRUE(
        block_diagonal_linear_fp8(a.view(), w.view(w.values, w.scales), c.n_groups, y).ok());
    for (int64_t g = 0; g < c.n_groups; ++g) {
      const testing::Fp8Group group = testing::fp8_group(
          a.values.data_as<uint8_t>(), a.scales.data_as<float>(), c.t, c.n_groups, w, g);
      Tensor y_group = Tensor::host(DType::kF32, {c.t, c.r});
      ASSERT_TRUE(
          linear_fp8(group.a.view(), group.w.view(group.w.values, group.w.scales), y_group.view())
              .ok());
      for (int64_t t = 0; t < c.t; ++t) {
        for (int64_t j = 0; j < c.r; ++j) {
          ASSERT_EQ(float_bits(y_storage.data_as<float>()[t * y_stride + g * c.r + j]),
                    float_bits(y_group.data_as<float>()[t * c.r + j]))
              << "group " << g << " t " << t << " output " << j;
        }
      }
      const testing::Fp8Reference ref = testing::fp8_reference(
          group.a.values.data_as<uint8_t>(), group.a.scales.data_as<float>(), c.t, group.w);
      EXPECT_LE(
          testing::fp8_sum_rel_error(y_storage.data_as<float>() + g * c.r, y_stride, ref, c.t, c.r),
          testing::kFp8LinearCpuSumRelTol);
    }
    for (int64_t t = 0; t < c.t; ++t) {
      EXPECT_EQ(y_storage.data_as<float>()[t * y_stride + n], -1.0f) << "row " << t;
    }
  }
}

}  // namespace
}  // namespace dsv4::kernels

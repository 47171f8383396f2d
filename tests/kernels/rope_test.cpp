// kernels::rope (and rms_norm_rope) against a float64 rotation (and norm) written here. The
// contract fixes the angle to the f32 product pos·θ (what transformers computes); everything after
// it is compared with double math.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "base/buffer.h"
#include "kernels/ops.h"
#include "testing/compare.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4::kernels {
namespace {

using testing::kF32OpRelTol;
using testing::max_row_rel_error;
using testing::SeededRng;

struct RopeCase {
  int n_tokens, n_heads, head_dim, n_pairs;
};

class RopeTest : public ::testing::TestWithParam<RopeCase> {};

Tensor random_positions(SeededRng& rng, int n_tokens) {
  Tensor positions = Tensor::host(DType::kI64, {n_tokens});
  for (int t = 0; t < n_tokens; ++t) positions.data_as<int64_t>()[t] = rng.uniform_int(0, 5000);
  return positions;
}

// θ_i = 10000^(−2i / 2P).
Tensor rope_frequencies(int n_pairs) {
  Tensor inv_freq = Tensor::host(DType::kF32, {n_pairs});
  for (int i = 0; i < n_pairs; ++i) {
    inv_freq.data_as<float>()[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / (2 * n_pairs)));
  }
  return inv_freq;
}

TEST_P(RopeTest, MatchesFloat64Rotation) {
  const RopeCase c = GetParam();
  SeededRng rng;
  std::normal_distribution<float> normal;
  Tensor x = Tensor::host(DType::kF32, {c.n_tokens, c.n_heads, c.head_dim});
  for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = normal(rng.engine());
  std::vector<float> original(x.data_as<float>(), x.data_as<float>() + x.numel());
  const Tensor positions = random_positions(rng, c.n_tokens);
  const Tensor inv_freq = rope_frequencies(c.n_pairs);
  ASSERT_TRUE(rope(x.view(), positions.view(), inv_freq.view(), RopeDirection::kForward).ok());

  std::vector<double> ref(original.begin(), original.end());
  const int nope = c.head_dim - 2 * c.n_pairs;
  for (int t = 0; t < c.n_tokens; ++t) {
    for (int i = 0; i < c.n_pairs; ++i) {
      const float angle =
          static_cast<float>(positions.data_as<int64_t>()[t]) * inv_freq.data_as<float>()[i];
      const double cs = std::cos(double{angle}), sn = std::sin(double{angle});
      for (int h = 0; h < c.n_heads; ++h) {
        double* pair = &ref[(t * c.n_heads + h) * c.head_dim + nope + 2 * i];
        const double a = pair[0], b = pair[1];
        pair[0] = a * cs - b * sn;
        pair[1] = b * cs + a * sn;
      }
    }
  }
  EXPECT_LT(max_row_rel_error(x.data_as<float>(), ref.data(), c.n_tokens * c.n_heads, c.head_dim),
            kF32OpRelTol);
  // The nope dims are untouched, bit for bit.
  for (int r = 0; r < c.n_tokens * c.n_heads; ++r) {
    for (int d = 0; d < nope; ++d) {
      ASSERT_EQ(x.data_as<float>()[r * c.head_dim + d], original[r * c.head_dim + d]);
    }
  }
  // The inverse rotation restores the input.
  ASSERT_TRUE(rope(x.view(), positions.view(), inv_freq.view(), RopeDirection::kInverse).ok());
  EXPECT_LT(
      max_row_rel_error(x.data_as<float>(), original.data(), c.n_tokens * c.n_heads, c.head_dim),
      kF32OpRelTol);
}

// rms_norm_rope: each head normalised (and weighted) in float64, then the float64 rotation.
TEST_P(RopeTest, RmsNormRopeMatchesFloat64) {
  const RopeCase c = GetParam();
  SeededRng rng;
  std::normal_distribution<float> normal;
  const int64_t n_rows = int64_t{c.n_tokens} * c.n_heads;
  Tensor x = Tensor::host(DType::kF32, {c.n_tokens, c.n_heads, c.head_dim});
  for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = 3.0f * normal(rng.engine());
  Tensor weight = Tensor::host(DType::kF32, {c.head_dim});
  for (int d = 0; d < c.head_dim; ++d) weight.data_as<float>()[d] = normal(rng.engine());
  const Tensor positions = random_positions(rng, c.n_tokens);
  const Tensor inv_freq = rope_frequencies(c.n_pairs);
  const float eps = 1e-6f;
  std::vector<double> ref(x.data_as<float>(), x.data_as<float>() + x.numel());
  ASSERT_TRUE(rms_norm_rope(x.view(), weight.view(), eps, positions.view(), inv_freq.view()).ok());
  const int nope = c.head_dim - 2 * c.n_pairs;
  for (int64_t r = 0; r < n_rows; ++r) {
    double* row = &ref[r * c.head_dim];
    double sum_sq = 0.0;
    for (int d = 0; d < c.head_dim; ++d) sum_sq += row[d] * row[d];
    const double inv_rms = 1.0 / std::sqrt(sum_sq / c.head_dim + eps);
    for (int d = 0; d < c.head_dim; ++d) row[d] *= inv_rms * weight.data_as<float>()[d];
    const int64_t t = r / c.n_heads;
    for (int i = 0; i < c.n_pairs; ++i) {
      const float angle =
          static_cast<float>(positions.data_as<int64_t>()[t]) * inv_freq.data_as<float>()[i];
      double* pair = row + nope + 2 * i;
      const double a = pair[0], b = pair[1];
      pair[0] = a * std::cos(double{angle}) - b * std::sin(double{angle});
      pair[1] = b * std::cos(double{angle}) + a * std::sin(double{angle});
    }
  }
  EXPECT_LT(max_row_rel_error(x.data_as<float>(), ref.data(), n_rows, c.head_dim), kF32OpRelTol);
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeTest,
                         ::testing::Values(RopeCase{1, 1, 2, 1}, RopeCase{5, 3, 48, 8},
                                           RopeCase{17, 4, 64, 8}, RopeCase{33, 1, 512, 32}));

}  // namespace
}  // namespace dsv4::kernels

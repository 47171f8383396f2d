// The dense ops of kernels/ops.h on the CPU against float64 references written here from the
// formulas, on seeded random inputs with poisoned outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "base/buffer.h"
#include "base/float_convert.h"
#include "kernels/contracts.h"
#include "kernels/ops.h"
#include "kernels/rms_norm_order_case.h"
#include "testing/compare.h"
#include "testing/fp8_weight.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4::kernels {
namespace {

using testing::kF32OpRelTol;
using testing::max_row_rel_error;
using testing::SeededRng;

std::vector<float> random_normal(SeededRng& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng.engine());
  return v;
}

TensorView view_of(std::vector<float>& v, Shape shape) {
  return TensorView::contiguous(v.data(), DType::kF32, Device::kCpu, shape);
}

std::vector<float> poisoned(size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

// y[T, N] = x[T, K] · w[N, K]ᵀ in float64.
std::vector<double> float64_linear(const std::vector<float>& x, const std::vector<float>& w, int t,
                                   int n, int k) {
  std::vector<double> y(static_cast<size_t>(t) * n);
  for (int i = 0; i < t; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int p = 0; p < k; ++p) acc += double(x[i * k + p]) * w[j * k + p];
      y[i * n + j] = acc;
    }
  return y;
}

class LinearTest : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(LinearTest, MatchesFloat64) {
  const auto [t, n, k] = GetParam();
  SeededRng rng;
  std::vector<float> x = random_normal(rng, t * k);
  std::vector<float> w = random_normal(rng, n * k);
  std::vector<float> y = poisoned(t * n);
  ASSERT_TRUE(linear(view_of(x, {t, k}), view_of(w, {n, k}), view_of(y, {t, n})).ok());
  const std::vector<double> ref = float64_linear(x, w, t, n, k);
  EXPECT_LT(max_row_rel_error(y.data(), ref.data(), t, n), kF32OpRelTol);
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearTest,
                         ::testing::Values(std::make_tuple(1, 1, 1), std::make_tuple(1, 64, 128),
                                           std::make_tuple(7, 33, 65),
                                           std::make_tuple(130, 96, 512)));

// A bf16 weight (what a device keeps of a bf16 checkpoint) is the same weight: rows of a
// strided bf16 matrix give the bits of the f32 weight with the same values.
TEST(LinearBf16WeightTest, GivesTheBitsOfTheSameF32Weight) {
  SeededRng rng;
  const int t = 3, n = 7, k = 37, stride = k + 3;
  std::vector<float> x = random_normal(rng, t * k);
  std::vector<uint16_t> w_bf16(n * stride, 0x7fc0);  // NaN padding: read it and the sums show
  std::vector<float> w_f32(n * k);
  for (int j = 0; j < n; ++j) {
    for (int p = 0; p < k; ++p) {
      w_bf16[j * stride + p] = float_to_bf16(static_cast<float>(rng.uniform(-1.0, 1.0)));
      w_f32[j * k + p] = bf16_to_float(w_bf16[j * stride + p]);
    }
  }
  TensorView w = TensorView::contiguous(w_bf16.data(), DType::kBF16, Device::kCpu, {n, k});
  w.stride[0] = stride;
  std::vector<float> want = poisoned(t * n), got = poisoned(t * n);
  ASSERT_TRUE(linear(view_of(x, {t, k}), view_of(w_f32, {n, k}), view_of(want, {t, n})).ok());
  ASSERT_TRUE(linear(view_of(x, {t, k}), w, view_of(got, {t, n})).ok());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
}

// An FP8 weight (e4m3 with power-of-two block scales, what a GPU keeps of an FP8 checkpoint) is
// its decoded f32 weight: the same bits from linear and block_diagonal_linear, on N and K off the
// 128 blocks and groups of 40 rows (a block's scales span groups), and within float64's
// tolerance of the decoded weight's exact product.
TEST(LinearFp8WeightTest, GivesTheBitsOfItsDecodedWeight) {
  SeededRng rng;
  const int t = 5, n = 200, k = 300, groups = 5;
  const testing::Fp8Weight w = testing::random_fp8_weight(rng, n, k);
  std::vector<float> decoded = w.decoded;
  std::vector<float> x = random_normal(rng, t * k);
  std::vector<float> want = poisoned(t * n), got = poisoned(t * n);
  ASSERT_TRUE(linear(view_of(x, {t, k}), view_of(decoded, {n, k}), view_of(want, {t, n})).ok());
  ASSERT_TRUE(linear(view_of(x, {t, k}), w.view(), view_of(got, {t, n})).ok());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
  const std::vector<double> ref = float64_linear(x, decoded, t, n, k);
  EXPECT_LT(max_row_rel_error(got.data(), ref.data(), t, n), kF32OpRelTol);

  const int64_t group_k = k;  // groups of n / groups = 40 rows
  std::vector<float> xg = random_normal(rng, t * groups * group_k);
  std::vector<float> want_g = poisoned(t * n), got_g = poisoned(t * n);
  ASSERT_TRUE(block_diagonal_linear(view_of(xg, {t, groups * group_k}), view_of(decoded, {n, k}),
                                    groups, view_of(want_g, {t, n}))
                  .ok());
  ASSERT_TRUE(block_diagonal_linear(view_of(xg, {t, groups * group_k}), w.view(), groups,
                                    view_of(got_g, {t, n}))
                  .ok());
  EXPECT_EQ(std::memcmp(got_g.data(), want_g.data(), got_g.size() * sizeof(float)), 0);
}

// G groups: against float64 per group, and each group the bits of linear() on its own columns.
TEST(BlockDiagonalLinearTest, IsEachGroupsLinear) {
  SeededRng rng;
  const int t = 3, g = 4, r = 5, k = 7;
  std::vector<float> x = random_normal(rng, t * g * k);
  std::vector<float> w = random_normal(rng, g * r * k);
  std::vector<float> y = poisoned(t * g * r);
  ASSERT_TRUE(block_diagonal_linear(view_of(x, {t, g * k}), view_of(w, {g * r, k}), g,
                                    view_of(y, {t, g * r}))
                  .ok());
  std::vector<double> ref(t * g * r);
  for (int i = 0; i < t; ++i)
    for (int n = 0; n < g * r; ++n) {
      double acc = 0.0;
      for (int p = 0; p < k; ++p) acc += double(x[i * g * k + n / r * k + p]) * w[n * k + p];
      ref[i * g * r + n] = acc;
    }
  EXPECT_LT(max_row_rel_error(y.data(), ref.data(), t, g * r), kF32OpRelTol);
  for (int group = 0; group < g; ++group) {
    TensorView xg = view_of(x, {t, k});
    xg.data = x.data() + group * k;
    xg.stride[0] = g * k;
    std::vector<float> one = poisoned(t * r);
    ASSERT_TRUE(
        linear(xg, view_of(w, {g * r, k}).rows(group * r, (group + 1) * r), view_of(one, {t, r}))
            .ok());
    for (int i = 0; i < t; ++i) {
      EXPECT_EQ(std::memcmp(&one[i * r], &y[i * g * r + group * r], r * sizeof(float)), 0);
    }
  }
}

TEST(LinearStridedTest, OutputIsColumnSlice) {
  SeededRng rng;
  // y is the right half of a [T, 2N] matrix, the way fused gate|up projections are written.
  const int t = 5, n = 6, k = 9;
  std::vector<float> x = random_normal(rng, t * k);
  std::vector<float> w = random_normal(rng, n * k);
  std::vector<float> wide = poisoned(t * 2 * n);
  TensorView y = view_of(wide, {t, n});
  y.data = wide.data() + n;
  y.stride[0] = 2 * n;
  ASSERT_TRUE(linear(view_of(x, {t, k}), view_of(w, {n, k}), y).ok());
  for (int i = 0; i < t; ++i) {
    EXPECT_TRUE(std::isnan(wide[i * 2 * n])) << "left half written";
    for (int j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int p = 0; p < k; ++p) acc += double(x[i * k + p]) * w[j * k + p];
      EXPECT_NEAR(wide[i * 2 * n + n + j], acc, 1e-5 * (1 + std::abs(acc)));
    }
  }
}

TEST(RmsNormTest, WeightedAndUnweighted) {
  SeededRng rng;
  const int t = 9, d = 96;
  std::vector<float> x = random_normal(rng, t * d, 3.0f);
  std::vector<float> w = random_normal(rng, d);
  for (bool weighted : {true, false}) {
    SCOPED_TRACE(weighted ? "weighted" : "unweighted");
    std::vector<float> y = poisoned(t * d);
    TensorView wv = weighted ? view_of(w, {d}) : TensorView{};
    ASSERT_TRUE(rms_norm(view_of(x, {t, d}), wv, 1e-6f, view_of(y, {t, d})).ok());
    std::vector<double> ref(t * d);
    for (int i = 0; i < t; ++i) {
      double ss = 0.0;
      for (int j = 0; j < d; ++j) ss += double(x[i * d + j]) * x[i * d + j];
      const double inv = 1.0 / std::sqrt(ss / d + 1e-6);
      for (int j = 0; j < d; ++j) ref[i * d + j] = x[i * d + j] * inv * (weighted ? w[j] : 1.0);
    }
    EXPECT_LT(max_row_rel_error(y.data(), ref.data(), t, d), kF32OpRelTol);
  }
}

// Rows of no columns: a [2, 3, 0] operand is six empty rows (as_rows must not divide by the
// zero width), and the norm writes nothing.
TEST(RmsNormTest, RowsOfNoColumnsAreANoOp) {
  std::vector<float> none;
  const TensorView x = view_of(none, {2, 3, 0});
  ASSERT_TRUE(rms_norm(x, TensorView{}, 1e-6f, x).ok());
  const RowMatrix rows = as_rows(x, "x");
  EXPECT_EQ(rows.n_rows, 6);
  EXPECT_EQ(rows.n_cols, 0);
}

// The sum of squares in ops.h's order, written as its definition: 1024 lanes, each summing its
// elements in turn, then a recursive pairwise tree over all of them (empty lanes included).
double lane_tree(const std::vector<double>& lanes, size_t lo, size_t hi) {
  if (hi - lo == 1) return lanes[lo];
  return lane_tree(lanes, lo, (lo + hi) / 2) + lane_tree(lanes, (lo + hi) / 2, hi);
}

TEST(RmsNormTest, SumsSquaresInTheLaneOrderBitForBit) {
  SeededRng rng;
  for (const int d : {1, 3, 96, 1000, 1024, 1500, 5000}) {
    SCOPED_TRACE(d);
    std::vector<float> x(d), w = random_normal(rng, d), y = poisoned(d);
    // Magnitudes over 2^±20: summed in another order, the float64 sum would differ.
    for (float& v : x) {
      v = std::ldexp(static_cast<float>(rng.uniform(-2.0, 2.0)), int(rng.uniform_int(-20, 20)));
    }
    ASSERT_TRUE(rms_norm(view_of(x, {1, d}), view_of(w, {d}), 1e-6f, view_of(y, {1, d})).ok());
    std::vector<double> lanes(kRmsNormLanes, 0.0);
    for (int i = 0; i < d; ++i) lanes[i % kRmsNormLanes] += double(x[i]) * x[i];
    const double sum_sq = lane_tree(lanes, 0, lanes.size());
    const float inv_rms = 1.0f / std::sqrt(static_cast<float>(sum_sq / d) + 1e-6f);
    for (int i = 0; i < d; ++i) ASSERT_EQ(y[i], x[i] * inv_rms * w[i]) << i;
  }
}

// The test above can fail: on a row built for it, a sequential float64 sum (the reference's
// order before the lanes) gives other bits.
TEST(RmsNormTest, AnotherSumOrderGivesOtherBits) {
  for (const int64_t d : {1024, 4096, 16384}) {
    SCOPED_TRACE(d);
    std::vector<float> x = testing::rms_norm_order_row(d), y = poisoned(d);
    const float eps = testing::kRmsNormOrderEps;
    ASSERT_TRUE(rms_norm(view_of(x, {1, d}), TensorView{}, eps, view_of(y, {1, d})).ok());
    double sequential = 0.0;
    for (const float v : x) sequential += double(v) * v;
    const float other = 1.0f / std::sqrt(static_cast<float>(sequential / d) + eps);
    EXPECT_NE(y[0], x[0] * other);
  }
}

TEST(SoftmaxTest, InPlaceMatchesFloat64) {
  SeededRng rng;
  const int t = 4, n = 37;
  std::vector<float> x = random_normal(rng, t * n, 10.0f);
  std::vector<float> y = x;
  ASSERT_TRUE(softmax(view_of(y, {t, n}), view_of(y, {t, n})).ok());
  std::vector<double> ref(t * n);
  for (int i = 0; i < t; ++i) {
    double sum = 0.0;
    for (int j = 0; j < n; ++j) sum += std::exp(double(x[i * n + j]));
    for (int j = 0; j < n; ++j) ref[i * n + j] = std::exp(double(x[i * n + j])) / sum;
  }
  EXPECT_LT(max_row_rel_error(y.data(), ref.data(), t, n), kF32OpRelTol);
}

TEST(SwigluTest, ClampsGateAboveAndUpBothSides) {
  SeededRng rng;
  const int t = 6, f = 40;
  const float limit = 2.0f;
  std::vector<float> gate_up = random_normal(rng, t * 2 * f, 4.0f);  // many values past the limit
  for (float clamp : {limit, 0.0f}) {
    SCOPED_TRACE(clamp);
    std::vector<float> out = poisoned(t * f);
    ASSERT_TRUE(swiglu(view_of(gate_up, {t, 2 * f}), clamp, view_of(out, {t, f})).ok());
    std::vector<double> ref(t * f);
    for (int i = 0; i < t; ++i)
      for (int j = 0; j < f; ++j) {
        double g = gate_up[i * 2 * f + j], u = gate_up[i * 2 * f + f + j];
        if (clamp > 0) {
          g = std::min<double>(g, clamp);
          u = std::max<double>(-clamp, std::min<double>(u, clamp));
        }
        ref[i * f + j] = g / (1.0 + std::exp(-g)) * u;
      }
    EXPECT_LT(max_row_rel_error(out.data(), ref.data(), t, f), kF32OpRelTol);
  }
}

// hc_expand_norm is hc_expand, then the unweighted rms_norm of each token's M·D new streams,
// bit for bit: for a batch of tokens, and for one token given as vectors (f [D], post [M]),
// which hc_expand takes as one row each; with and without an addend to f.
TEST(HcExpandNormTest, IsTheExpandThenItsNorm) {
  SeededRng rng;
  const int64_t t = 3, m = 4, d = 40;
  std::vector<float> f = random_normal(rng, t * d), residual = random_normal(rng, t * m * d),
                     post = random_normal(rng, t * m), comb = random_normal(rng, t * m * m),
                     addend = random_normal(rng, t * d);
  for (const auto& [vectors, with_addend] :
       {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
    SCOPED_TRACE(std::string(vectors ? "one token as vectors" : "a batch") +
                 (with_addend ? ", an addend" : ""));
    const int64_t n = vectors ? 1 : t;
    const TensorView fv = vectors ? view_of(f, {d}) : view_of(f, {t, d});
    const TensorView av = !with_addend ? TensorView{}
                          : vectors    ? view_of(addend, {d})
                                       : view_of(addend, {t, d});
    const TensorView pv = vectors ? view_of(post, {m}) : view_of(post, {t, m});
    const TensorView rv = view_of(residual, {n, m, d}), cv = view_of(comb, {n, m, m});
    std::vector<float> out = poisoned(n * m * d), normed = poisoned(n * m * d);
    std::vector<float> want_out = poisoned(n * m * d), want_normed = poisoned(n * m * d);
    ASSERT_TRUE(hc_expand_norm(fv, av, rv, pv, cv, 1e-6f, view_of(out, {n, m, d}),
                               view_of(normed, {n, m * d}))
                    .ok());
    ASSERT_TRUE(hc_expand(fv, av, rv, pv, cv, view_of(want_out, {n, m, d})).ok());
    ASSERT_TRUE(rms_norm(view_of(want_out, {n, m * d}), TensorView{}, 1e-6f,
                         view_of(want_normed, {n, m * d}))
                    .ok());
    EXPECT_EQ(std::memcmp(out.data(), want_out.data(), out.size() * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(normed.data(), want_normed.data(), normed.size() * sizeof(float)), 0);
  }
}

// hc_expand with f_addend (the FFN site's shared expert) is add, then hc_expand, bit for bit.
TEST(HcExpandTest, AddendIsTheAddThenTheExpand) {
  SeededRng rng;
  const int64_t t = 3, m = 4, d = 40;
  std::vector<float> f = random_normal(rng, t * d), addend = random_normal(rng, t * d),
                     residual = random_normal(rng, t * m * d), post = random_normal(rng, t * m),
                     comb = random_normal(rng, t * m * m);
  std::vector<float> out = poisoned(t * m * d), sum = poisoned(t * d), want = poisoned(t * m * d);
  const TensorView rv = view_of(residual, {t, m, d}), pv = view_of(post, {t, m});
  const TensorView cv = view_of(comb, {t, m, m});
  ASSERT_TRUE(
      hc_expand(view_of(f, {t, d}), view_of(addend, {t, d}), rv, pv, cv, view_of(out, {t, m, d}))
          .ok());
  ASSERT_TRUE(add(view_of(f, {t, d}), view_of(addend, {t, d}), view_of(sum, {t, d})).ok());
  ASSERT_TRUE(
      hc_expand(view_of(sum, {t, d}), TensorView{}, rv, pv, cv, view_of(want, {t, m, d})).ok());
  EXPECT_EQ(std::memcmp(out.data(), want.data(), out.size() * sizeof(float)), 0);
}

TEST(EmbeddingTest, GathersRowsAndAddWorks) {
  SeededRng rng;
  const int v = 10, d = 8;
  std::vector<float> table = random_normal(rng, v * d);
  std::vector<int64_t> ids = {3, 0, 9, 3};
  std::vector<float> y = poisoned(ids.size() * d);
  TensorView idv = TensorView::contiguous(ids.data(), DType::kI64, Device::kCpu, {4});
  ASSERT_TRUE(embedding(view_of(table, {v, d}), idv, view_of(y, {4, d})).ok());
  for (int t = 0; t < 4; ++t)
    for (int j = 0; j < d; ++j) EXPECT_EQ(y[t * d + j], table[ids[t] * d + j]);
  std::vector<float> sum = poisoned(ids.size() * d);
  ASSERT_TRUE(add(view_of(y, {4, d}), view_of(y, {4, d}), view_of(sum, {4, d})).ok());
  for (int i = 0; i < 4 * d; ++i) EXPECT_EQ(sum[i], 2 * y[i]);
}

// Rows of two buffers, one of them twice and out of order, and a bf16 row width that is no
// multiple of 4 bytes: each gathered row is its source row's bits, read from the buffers here.
TEST(GatherRowsTest, CopiesEachAddressedRow) {
  SeededRng rng;
  const int w = 5;
  std::vector<float> a = random_normal(rng, 3 * w), b = random_normal(rng, 4 * w);
  const std::vector<std::pair<const std::vector<float>*, int>> picks = {
      {&b, 2}, {&a, 0}, {&b, 2}, {&a, 2}, {&b, 3}};
  std::vector<int64_t> addresses;
  for (const auto& [buffer, row] : picks) {
    addresses.push_back(reinterpret_cast<int64_t>(buffer->data() + row * w));
  }
  const auto n = static_cast<int64_t>(picks.size());
  std::vector<float> y = poisoned(picks.size() * w);
  const TensorView rows = TensorView::contiguous(addresses.data(), DType::kI64, Device::kCpu, {n});
  ASSERT_TRUE(gather_rows(rows, view_of(y, {n, w})).ok());
  for (int64_t i = 0; i < n; ++i) {
    const auto& [buffer, row] = picks[static_cast<size_t>(i)];
    for (int j = 0; j < w; ++j) EXPECT_EQ(y[i * w + j], (*buffer)[row * w + j]) << i << " " << j;
  }

  std::vector<uint16_t> halves(4 * 3);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(1000 + i);
  const std::vector<int64_t> half_rows = {reinterpret_cast<int64_t>(halves.data() + 3 * 3),
                                          reinterpret_cast<int64_t>(halves.data() + 1 * 3)};
  std::vector<uint16_t> got(2 * 3, 0xFFFF);
  ASSERT_TRUE(gather_rows(TensorView::contiguous(const_cast<int64_t*>(half_rows.data()),
                                                 DType::kI64, Device::kCpu, {2}),
                          TensorView::contiguous(got.data(), DType::kBF16, Device::kCpu, {2, 3}))
                  .ok());
  EXPECT_EQ(got, (std::vector<uint16_t>{1009, 1010, 1011, 1003, 1004, 1005}));
}

// Blocks of several sizes between two buffers, one of them within the same buffer: each
// destination gets its source's bytes, every other byte stays as it was.
TEST(CopyBlocksTest, CopiesEachBlockAndNothingElse) {
  std::vector<uint8_t> a(64), b(48, 0xEE);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<uint8_t>(i);
  const std::vector<uint8_t> a_before = a;
  struct Copy {
    uint8_t *from, *to;
    int64_t bytes;
  };
  const std::vector<Copy> copies = {{a.data() + 3, b.data(), 5},
                                    {a.data() + 40, b.data() + 16, 17},
                                    {a.data(), a.data() + 50, 4},
                                    {a.data() + 10, b.data() + 40, 0}};
  std::vector<int64_t> tables;
  for (const auto member : {0, 1, 2}) {
    for (const Copy& c : copies) {
      tables.push_back(member == 0   ? reinterpret_cast<int64_t>(c.from)
                       : member == 1 ? reinterpret_cast<int64_t>(c.to)
                                     : c.bytes);
    }
  }
  const auto n = static_cast<int64_t>(copies.size());
  const auto table = [&](int64_t i) {
    return TensorView::contiguous(tables.data() + i * n, DType::kI64, Device::kCpu, {n});
  };
  ASSERT_TRUE(copy_blocks(table(0), table(1), table(2)).ok());
  std::vector<uint8_t> want_b(48, 0xEE), want_a = a_before;
  std::copy_n(a_before.begin() + 3, 5, want_b.begin());
  std::copy_n(a_before.begin() + 40, 17, want_b.begin() + 16);
  std::copy_n(a_before.begin(), 4, want_a.begin() + 50);
  EXPECT_EQ(b, want_b);
  EXPECT_EQ(a, want_a);
}

}  // namespace
}  // namespace dsv4::kernels

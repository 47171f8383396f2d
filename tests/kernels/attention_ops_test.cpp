// The attention ops of kernels/ops.h (sparse_attention, compressor_pool, indexer_scores, topk) on
// the CPU against float64 references written here from the formulas, on seeded random inputs
// with poisoned outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "base/buffer.h"
#include "base/float_convert.h"
#include "kernels/decode_rows_checks.h"
#include "kernels/fp8_scale.h"
#include "kernels/ops.h"
#include "testing/compare.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4::kernels {
namespace {

using testing::kF32OpRelTol;
using testing::max_row_rel_error;
using testing::SeededRng;

constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor random_tensor(SeededRng& rng, Shape shape, float scale = 1.0f) {
  std::normal_distribution<float> normal(0.0f, scale);
  Tensor t = Tensor::host(DType::kF32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = normal(rng.engine());
  return t;
}

Tensor poisoned(DType dtype, Shape shape) {
  Tensor t = Tensor::host(dtype, shape);
  if (dtype == DType::kF32) {
    std::fill_n(t.data_as<float>(), t.numel(), std::numeric_limits<float>::quiet_NaN());
  } else {
    std::fill_n(t.data_as<int32_t>(), t.numel(), 0x7eadbeef);
  }
  return t;
}

// Candidate lists with some −1 holes; every query keeps at least one candidate in `indices`.
Tensor random_indices(SeededRng& rng, int64_t n_tokens, int64_t k, int64_t n_rows) {
  Tensor t = Tensor::host(DType::kI32, {n_tokens, k});
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.data_as<int32_t>()[i] =
        rng.uniform_int(0, 3) == 0 ? -1 : static_cast<int32_t>(rng.uniform_int(0, n_rows - 1));
  }
  for (int64_t r = 0; r < n_tokens; ++r)
    t.data_as<int32_t>()[r * k] = static_cast<int32_t>(r % n_rows);
  return t;
}

// A query's candidate rows (window source, then extra), as the reference attends to them.
std::vector<const float*> listed_rows(const Tensor& indices, int64_t t, const Tensor& kv) {
  std::vector<const float*> rows;
  const int64_t k = indices.shape()[1], head_dim = kv.shape()[1];
  for (int64_t j = 0; j < k; ++j) {
    const int32_t r = indices.data_as<int32_t>()[t * k + j];
    if (r >= 0) rows.push_back(kv.data_as<float>() + r * head_dim);
  }
  return rows;
}

// out[t, h] in float64: softmax over q·row·scale of `rows_of(t)` and the sink, times the rows.
template <typename RowsOf>
std::vector<double> reference_attention(const Tensor& q, const Tensor& sinks, double scale,
                                        RowsOf rows_of) {
  const int64_t n_tokens = q.shape()[0], n_heads = q.shape()[1], head_dim = q.shape()[2];
  std::vector<double> ref(q.numel(), 0.0);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const std::vector<const float*> rows = rows_of(t);
    for (int64_t h = 0; h < n_heads; ++h) {
      const float* qh = q.data_as<float>() + (t * n_heads + h) * head_dim;
      std::vector<double> w(rows.size());
      double denom = std::exp(double{sinks.data_as<float>()[h]});
      for (size_t j = 0; j < rows.size(); ++j) {
        double dot = 0.0;
        for (int64_t d = 0; d < head_dim; ++d) dot += double{qh[d]} * rows[j][d];
        w[j] = std::exp(dot * scale);
        denom += w[j];
      }
      for (size_t j = 0; j < rows.size(); ++j) {
        for (int64_t d = 0; d < head_dim; ++d)
          ref[(t * n_heads + h) * head_dim + d] += w[j] / denom * rows[j][d];
      }
    }
  }
  return ref;
}

struct AttentionCase {
  int n_tokens, n_heads, head_dim, n_rows, k_window, n_extra, k_extra;
};

class SparseAttentionTest : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(SparseAttentionTest, MatchesFloat64) {
  const AttentionCase c = GetParam();
  SeededRng rng;
  Tensor q = random_tensor(rng, {c.n_tokens, c.n_heads, c.head_dim});
  Tensor kv = random_tensor(rng, {c.n_rows, c.head_dim});
  Tensor idx = random_indices(rng, c.n_tokens, c.k_window, c.n_rows);
  Tensor sinks = random_tensor(rng, {c.n_heads}, 2.0f);
  Tensor extra, extra_idx;
  SparseAttentionParams p;
  p.q = q.view();
  p.kv = kv.view();
  p.indices = idx.view();
  if (c.n_extra > 0) {
    extra = random_tensor(rng, {c.n_extra, c.head_dim});
    extra_idx = random_indices(rng, c.n_tokens, c.k_extra, c.n_extra);
    p.extra_kv = extra.view();
    p.extra_indices = extra_idx.view();
  }
  p.sinks = sinks.view();
  p.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  Tensor out = poisoned(DType::kF32, q.shape());
  p.out = out.view();
  ASSERT_TRUE(sparse_attention(p).ok());

  const std::vector<double> ref =
      reference_attention(q, sinks, 1.0 / std::sqrt(double(c.head_dim)), [&](int64_t t) {
        std::vector<const float*> rows = listed_rows(idx, t, kv);
        if (c.n_extra > 0) {
          for (const float* row : listed_rows(extra_idx, t, extra)) rows.push_back(row);
        }
        return rows;
      });
  EXPECT_LT(max_row_rel_error(out.data_as<float>(), ref.data(), c.n_tokens * c.n_heads, c.head_dim),
            kF32OpRelTol);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SparseAttentionTest,
                         ::testing::Values(AttentionCase{1, 1, 8, 1, 1, 0, 0},
                                           AttentionCase{1, 4, 64, 20, 16, 5, 5},
                                           AttentionCase{9, 6, 48, 11, 4, 7, 2},
                                           AttentionCase{40, 8, 32, 64, 24, 0, 0}));

// Causal compressed entries as one list of every entry [1, Ne] and the queries' positions give
// what the per-query table does (entry j for j < (p + 1) / m, −1 after), which the model would
// otherwise upload for HCA rows. Both against float64 over the table's rows.
TEST(SparseAttentionTest, CausalSharedListIsItsPerQueryTable) {
  SeededRng rng;
  const int n_tokens = 7, n_heads = 3, head_dim = 16, n_rows = 12, k_window = 5, n_extra = 9;
  const int64_t ratio = 4;
  Tensor q = random_tensor(rng, {n_tokens, n_heads, head_dim});
  Tensor kv = random_tensor(rng, {n_rows, head_dim});
  Tensor idx = random_indices(rng, n_tokens, k_window, n_rows);
  Tensor extra = random_tensor(rng, {n_extra, head_dim});
  Tensor sinks = random_tensor(rng, {n_heads}, 2.0f);
  Tensor positions = Tensor::host(DType::kI64, {n_tokens});
  Tensor shared = Tensor::host(DType::kI32, {1, n_extra});
  Tensor table = Tensor::host(DType::kI32, {n_tokens, n_extra});
  std::iota(shared.data_as<int32_t>(), shared.data_as<int32_t>() + n_extra, 0);
  for (int t = 0; t < n_tokens; ++t) {
    // No block complete yet (2); on a block's last token and the one before it (3, 6, 7); the
    // last entry's last token (35); past the last entry (100); anywhere.
    const int64_t fixed[] = {2, 3, 6, 7, ratio * n_extra - 1, 100};
    const int64_t p = t < 6 ? fixed[t] : rng.uniform_int(0, ratio * (n_extra + 2));
    positions.data_as<int64_t>()[t] = p;
    for (int j = 0; j < n_extra; ++j)
      table.data_as<int32_t>()[t * n_extra + j] = j < (p + 1) / ratio ? j : -1;
  }
  SparseAttentionParams p;
  p.q = q.view();
  p.kv = kv.view();
  p.indices = idx.view();
  p.extra_kv = extra.view();
  p.sinks = sinks.view();
  p.scale = 0.5f;
  Tensor by_table = poisoned(DType::kF32, q.shape()), causal = poisoned(DType::kF32, q.shape());
  p.extra_indices = table.view();
  p.out = by_table.view();
  ASSERT_TRUE(sparse_attention(p).ok());
  p.extra_indices = shared.view();
  p.extra_positions = positions.view();
  p.extra_ratio = ratio;
  p.out = causal.view();
  ASSERT_TRUE(sparse_attention(p).ok());

  const std::vector<double> ref = reference_attention(q, sinks, 0.5, [&](int64_t t) {
    std::vector<const float*> rows = listed_rows(idx, t, kv);
    for (const float* row : listed_rows(table, t, extra)) rows.push_back(row);
    return rows;
  });
  for (const Tensor* out : {&by_table, &causal}) {
    EXPECT_LT(max_row_rel_error(out->data_as<float>(), ref.data(), n_tokens * n_heads, head_dim),
              kF32OpRelTol);
  }
}

class CompressorPoolTest : public ::testing::TestWithParam<std::tuple<bool, int, int, int>> {};

TEST_P(CompressorPoolTest, MatchesFloat64) {
  const auto [overlap, ratio, width, n_entries] = GetParam();
  SeededRng rng;
  const int halves = overlap ? 2 : 1;
  const int n_rows =
      (n_entries + halves - 1) * ratio + static_cast<int>(rng.uniform_int(0, ratio - 1));
  Tensor kv = random_tensor(rng, {n_rows, halves * width});
  Tensor gate = random_tensor(rng, {n_rows, halves * width}, 2.0f);
  Tensor ape = random_tensor(rng, {ratio, halves * width});
  if (overlap) {  // the cache's "no previous block": −inf gates on the first block
    for (int i = 0; i < ratio * halves * width; ++i) gate.data_as<float>()[i] = -kInf;
  }
  Tensor out = poisoned(DType::kF32, {n_entries, width});
  ASSERT_TRUE(compressor_pool({kv.view(), gate.view(), ape.view(), overlap, out.view()}).ok());

  std::vector<double> ref(n_entries * width);
  const int row_width = halves * width;
  for (int w = 0; w < n_entries; ++w) {
    for (int i = 0; i < width; ++i) {
      std::vector<double> score, value;
      for (int s = 0; s < halves * ratio; ++s) {
        const int row = w * ratio + s;
        const int col = (s / ratio) * width + i;
        score.push_back(double{gate.data_as<float>()[row * row_width + col]} +
                        ape.data_as<float>()[(s % ratio) * row_width + col]);
        value.push_back(kv.data_as<float>()[row * row_width + col]);
      }
      const double top = *std::max_element(score.begin(), score.end());
      double denom = 0.0, acc = 0.0;
      for (size_t s = 0; s < score.size(); ++s) denom += std::exp(score[s] - top);
      for (size_t s = 0; s < score.size(); ++s) acc += std::exp(score[s] - top) / denom * value[s];
      ref[w * width + i] = acc;
    }
  }
  EXPECT_LT(max_row_rel_error(out.data_as<float>(), ref.data(), n_entries, width), kF32OpRelTol);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CompressorPoolTest,
                         ::testing::Values(std::make_tuple(false, 4, 8, 1),
                                           std::make_tuple(false, 16, 64, 3),
                                           std::make_tuple(true, 4, 32, 1),
                                           std::make_tuple(true, 4, 64, 6),
                                           std::make_tuple(true, 8, 16, 3)));

// scores[t, n] = Σ_h (w[t,h]·weight_scale)·(ReLU(q[t,h]·k[n])·q_scale) in float64 (q rows
// [T·HI, DI] or [T, HI, DI]).
std::vector<double> reference_scores(const Tensor& q, const Tensor& keys, const Tensor& weights,
                                     double q_scale, double weight_scale, int64_t n_heads) {
  const int64_t n_entries = keys.shape()[0], head_dim = keys.shape()[1];
  const int64_t n_tokens = weights.numel() / n_heads;
  std::vector<double> ref(n_tokens * n_entries, 0.0);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t n = 0; n < n_entries; ++n) {
      for (int64_t h = 0; h < n_heads; ++h) {
        double dot = 0.0;
        for (int64_t d = 0; d < head_dim; ++d) {
          dot += double{q.data_as<float>()[(t * n_heads + h) * head_dim + d]} *
                 keys.data_as<float>()[n * head_dim + d];
        }
        ref[t * n_entries + n] +=
            weight_scale * weights.data_as<float>()[t * n_heads + h] * q_scale * std::max(dot, 0.0);
      }
    }
  }
  return ref;
}

TEST(IndexerScoresTest, MatchesFloat64) {
  SeededRng rng;
  const int n_tokens = 7, n_heads = 3, head_dim = 16, n_entries = 9;
  Tensor q = random_tensor(rng, {n_tokens, n_heads, head_dim});
  Tensor keys = random_tensor(rng, {n_entries, head_dim});
  Tensor weights = random_tensor(rng, {n_tokens, n_heads});
  Tensor scores = poisoned(DType::kF32, {n_tokens, n_entries});
  IndexerScoreParams p{q.view(), keys.view(), weights.view(), 0.25f, 0.5f, scores.view()};
  ASSERT_TRUE(indexer_scores(p).ok());
  const std::vector<double> ref = reference_scores(q, keys, weights, 0.25, 0.5, n_heads);
  EXPECT_LT(max_row_rel_error(scores.data_as<float>(), ref.data(), n_tokens, n_entries),
            kF32OpRelTol);
}

// A copy of t with every element rounded to bf16.
Tensor rounded_to_bf16(const Tensor& t) {
  Tensor r = Tensor::host(DType::kF32, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i)
    r.data_as<float>()[i] = round_to_bf16(t.data_as<float>()[i]);
  return r;
}

// The fast profile's attention reference is the float64 attention of the bf16-rounded inputs
// (up to its f32 softmax), and it rounds unrounded inputs itself: the same bytes either way.
TEST(SparseAttentionBf16Test, IsTheAttentionOfBf16RoundedInputs) {
  SeededRng rng;
  const int n_tokens = 5, n_heads = 3, head_dim = 40, n_rows = 30, k_window = 21;
  const Tensor q = random_tensor(rng, {n_tokens, n_heads, head_dim});
  const Tensor kv = random_tensor(rng, {n_rows, head_dim});
  const Tensor idx = random_indices(rng, n_tokens, k_window, n_rows);
  const Tensor sinks = random_tensor(rng, {n_heads}, 2.0f);
  const Tensor q_bf16 = rounded_to_bf16(q), kv_bf16 = rounded_to_bf16(kv);
  const float scale = 2.0f / std::sqrt(static_cast<float>(head_dim));
  auto run = [&](const Tensor& queries, const Tensor& rows) {
    Tensor out = poisoned(DType::kF32, q.shape());
    SparseAttentionParams p;
    p.q = queries.view();
    p.kv = rows.view();
    p.indices = idx.view();
    p.sinks = sinks.view();
    p.scale = scale;
    p.out = out.view();
    EXPECT_TRUE(sparse_attention_bf16(p).ok());
    return out;
  };
  const Tensor out = run(q, kv);
  const Tensor out_of_rounded = run(q_bf16, kv_bf16);
  EXPECT_EQ(std::memcmp(out.data_as<float>(), out_of_rounded.data_as<float>(),
                        out.numel() * sizeof(float)),
            0);
  const std::vector<double> ref = reference_attention(
      q_bf16, sinks, double{scale}, [&](int64_t t) { return listed_rows(idx, t, kv_bf16); });
  EXPECT_LT(max_row_rel_error(out.data_as<float>(), ref.data(), n_tokens * n_heads, head_dim),
            kF32OpRelTol);
}

// With out_fp8 the fast attention's output leaves turned back and quantized for wo_a: against
// the plain call's rows, each head's trailing rope pairs turned back at the query's position in
// float64, and the E4M3 codes within half an E4M3 step of them (a group's scale is the power of
// two above its amax / 448, so every value sits on that scale's grid of 2⁻³ relative steps).
TEST(SparseAttentionBf16Test, Fp8OutputIsTheRowsTurnedBackAndQuantized) {
  SeededRng rng;
  const int n_tokens = 4, n_heads = 2, head_dim = 128, pairs = 8, n_rows = 30, k_window = 21;
  const Tensor q = random_tensor(rng, {n_tokens, n_heads, head_dim});
  const Tensor kv = random_tensor(rng, {n_rows, head_dim});
  const Tensor idx = random_indices(rng, n_tokens, k_window, n_rows);
  const Tensor sinks = random_tensor(rng, {n_heads}, 2.0f);
  std::vector<int64_t> at(n_tokens);
  for (int64_t& position : at) position = rng.uniform_int(0, 5000);
  const Tensor positions = testing::host_values(DType::kI64, {n_tokens}, at);
  const Tensor inv_freq = random_tensor(rng, {pairs}, 0.5f);
  SparseAttentionParams p;
  p.q = q.view();
  p.kv = kv.view();
  p.indices = idx.view();
  p.sinks = sinks.view();
  p.scale = 0.1f;
  const Tensor plain = poisoned(DType::kF32, q.shape());
  p.out = plain.view();
  ASSERT_TRUE(sparse_attention_bf16(p).ok());
  const Tensor out = poisoned(DType::kF32, q.shape());
  Tensor codes = Tensor::host(DType::kF8E4M3, {n_tokens, n_heads * head_dim});
  std::fill_n(codes.data_as<uint8_t>(), codes.numel(), uint8_t{0x7f});  // NaN until written
  const Tensor scales = poisoned(DType::kF32, {n_tokens, n_heads * head_dim / 128});
  p.out = out.view();
  p.out_fp8 = {codes.view(), scales.view()};
  p.rope_positions = positions.view();
  p.rope_inv_freq = inv_freq.view();
  ASSERT_TRUE(sparse_attention_bf16(p).ok());
  const float* x = plain.data_as<float>();
  const float* y = out.data_as<float>();
  const int64_t first_pair = head_dim - 2 * pairs;
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t row = (t * n_heads + h) * head_dim;
      const float scale = scales.data_as<float>()[t * n_heads + h];  // a head is one group
      for (int64_t d = 0; d < head_dim; ++d) {
        double want = x[row + d];
        if (d >= first_pair) {
          const int64_t pair = (d - first_pair) / 2, even = first_pair + 2 * pair;
          // The angle as the op forms it, one f32 product; its turn in float64.
          const double angle = static_cast<float>(at[t]) * inv_freq.data_as<float>()[pair];
          const double a = x[row + even], b = x[row + even + 1];
          want = d == even ? a * std::cos(angle) + b * std::sin(angle)
                           : b * std::cos(angle) - a * std::sin(angle);
        }
        EXPECT_NEAR(y[row + d], want, 1e-5 * (1.0 + std::abs(want))) << t << ", " << h << ", " << d;
        const double decoded = e4m3_to_float(codes.data_as<uint8_t>()[row + d]) * double{scale};
        EXPECT_LE(std::abs(decoded - y[row + d]), 0.0625 * std::abs(y[row + d]) + 1e-3 * scale)
            << t << ", " << h << ", " << d;
      }
    }
  }
}

// DeepSeek's UE8M0 activation scale, by hand: the smallest power of two ≥ amax / 448 (amax
// floored at 1e-4).
TEST(IndexerScoresFp8Test, GroupScaleIsThePowerOfTwoAbove) {
  EXPECT_EQ(fp8_activation_scale(448.0f), 1.0f);
  EXPECT_EQ(fp8_activation_scale(449.0f), 2.0f);
  EXPECT_EQ(fp8_activation_scale(224.0f), 0.5f);
  EXPECT_EQ(fp8_activation_scale(1.0f), 1.0f / 256);             // 1/448 ∈ (2⁻⁹, 2⁻⁸]
  EXPECT_EQ(fp8_activation_scale(256.0f), 1.0f);                 // 0.571…
  EXPECT_EQ(fp8_activation_scale(0.0f), std::ldexp(1.0f, -22));  // 1e-4 / 448 ≈ 2.2e-7 ∈ (2⁻²³, 2⁻²²]
}

// On inputs that E4M3 holds exactly under their own scale (each row a power of two 2^e times
// E4M3 values of magnitude ≤ 256, one of them ±256·2^e, so its scale is 2^e), quantizing loses
// nothing and the FP8 scores are the float64 ones of the formula.
TEST(IndexerScoresFp8Test, LosslessInputsGiveTheExactScores) {
  SeededRng rng;
  const int n_tokens = 4, n_heads = 5, head_dim = 24, n_entries = 11;
  std::vector<float> grid;  // non-negative E4M3 values ≤ 256
  for (int code = 0; code < 0x7f; ++code) {
    if (e4m3_to_float(static_cast<uint8_t>(code)) <= 256.0f) grid.push_back(e4m3_to_float(code));
  }
  auto exact_rows = [&](int64_t n_rows) {
    Tensor t = Tensor::host(DType::kF32, {n_rows, head_dim});
    for (int64_t r = 0; r < n_rows; ++r) {
      const float row_scale = std::ldexp(1.0f, static_cast<int>(rng.uniform_int(-12, 2)));
      for (int64_t d = 0; d < head_dim; ++d) {
        const float v = grid[rng.uniform_int(0, static_cast<int64_t>(grid.size()) - 1)];
        t.data_as<float>()[r * head_dim + d] = (rng.uniform_int(0, 1) ? v : -v) * row_scale;
      }
      t.data_as<float>()[r * head_dim + rng.uniform_int(0, head_dim - 1)] = 256.0f * row_scale;
    }
    return t;
  };
  const Tensor q = exact_rows(n_tokens * n_heads), keys = exact_rows(n_entries);
  const Tensor weights = random_tensor(rng, {n_tokens, n_heads});
  Tensor scores = poisoned(DType::kF32, {n_tokens, n_entries});
  IndexerScoreParams p{q.view().reshaped({n_tokens, n_heads, head_dim}),
                       keys.view(),
                       weights.view(),
                       0.25f,
                       0.5f,
                       scores.view()};
  ASSERT_TRUE(indexer_scores_fp8(p).ok());
  const std::vector<double> ref = reference_scores(q, keys, weights, 0.25, 0.5, n_heads);
  EXPECT_LT(max_row_rel_error(scores.data_as<float>(), ref.data(), n_tokens, n_entries),
            kF32OpRelTol);
}

TEST(TopkTest, PicksLargestAmongCandidatesWithTiesByIndex) {
  SeededRng rng;
  const int n_tokens = 12, n_entries = 10, k = 4;
  Tensor scores = Tensor::host(DType::kF32, {n_tokens, n_entries});
  // Few distinct values, so ties are frequent.
  for (int64_t i = 0; i < scores.numel(); ++i)
    scores.data_as<float>()[i] = static_cast<float>(rng.uniform_int(-2, 2));
  Tensor limits = Tensor::host(DType::kI32, {n_tokens});
  for (int t = 0; t < n_tokens; ++t)
    limits.data_as<int32_t>()[t] = static_cast<int32_t>(t % (n_entries + 2));
  Tensor picks = poisoned(DType::kI32, {n_tokens, k});
  ASSERT_TRUE(topk(scores.view(), limits.view(), picks.view()).ok());
  for (int t = 0; t < n_tokens; ++t) {
    const float* row = scores.data_as<float>() + t * n_entries;
    std::vector<int> order(std::min(limits.data_as<int32_t>()[t], n_entries));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [row](int a, int b) { return row[a] > row[b]; });
    for (int j = 0; j < k; ++j) {
      const int expected = j < static_cast<int>(order.size()) ? order[j] : -1;
      EXPECT_EQ(picks.data_as<int32_t>()[t * k + j], expected) << "row " << t << " pick " << j;
    }
  }
}

TEST(TopkTest, NoCountsMeansEveryEntryIsACandidate) {
  SeededRng rng;
  const int n_tokens = 5, n_entries = 9, k = 12;  // k > N: the tail is −1
  Tensor scores = Tensor::host(DType::kF32, {n_tokens, n_entries});
  for (int64_t i = 0; i < scores.numel(); ++i)
    scores.data_as<float>()[i] = static_cast<float>(rng.uniform_int(-3, 3));
  Tensor all = Tensor::host(DType::kI32, {n_tokens});
  std::fill_n(all.data_as<int32_t>(), n_tokens, n_entries);
  Tensor want = poisoned(DType::kI32, {n_tokens, k}), got = poisoned(DType::kI32, {n_tokens, k});
  ASSERT_TRUE(topk(scores.view(), all.view(), want.view()).ok());
  ASSERT_TRUE(topk(scores.view(), TensorView{}, got.view()).ok());
  for (int64_t i = 0; i < want.numel(); ++i) {
    ASSERT_EQ(got.data_as<int32_t>()[i], want.data_as<int32_t>()[i]) << "pick " << i;
  }
  EXPECT_EQ(got.data_as<int32_t>()[k - 1], -1);
}

// Decode rows (one launch for a step's sequences, each over its own buffers) against the calls
// each sequence makes alone: the same bits (decode_rows_checks.h).
TEST(DecodeRowsTest, SparseAttentionRowsAreTheirSingleCalls) {
  testing::expect_decode_attention_rows_match_single_calls(Device::kCpu);
}
TEST(DecodeRowsTest, IndexerRowsAreTheirSingleCalls) {
  testing::expect_indexer_rows_match_single_calls(Device::kCpu);
}
TEST(DecodeRowsTest, CompressorDecodeIsTheOneTokenStepOfThePlainOps) {
  testing::expect_compressor_decode_matches_plain_ops(Device::kCpu);
}
TEST(DecodeRowsTest, CompressorDecodeRunsAreTheirRowsOneByOne) {
  testing::expect_compressor_decode_runs_match_row_by_row(Device::kCpu);
}

}  // namespace
}  // namespace dsv4::kernels

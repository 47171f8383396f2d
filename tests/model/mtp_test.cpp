// The MTP draft block (model/mtp.h) against a composition written here: its input (embedding,
// enorm, e_proj on every stream, hnorm and h_proj of each stream) and its head (its own hc_head,
// its norm, the model's head) in float64, around layer_forward of its V4 block as layer n_layer
// over a fresh cache; the same rows fed one at a time; scattered input rows and last-row outputs;
// draft rows rolled back leaving no trace; bad calls refused. Fresh random inputs every run, on
// each golden model with a random MTP block (mtp_fixture.h).
#include "model/mtp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/loader.h"
#include "kernels/ops.h"
#include "model/cache_rollback.h"
#include "model/golden.h"
#include "model/layer.h"
#include "model/mtp_fixture.h"
#include "testing/compare.h"
#include "testing/tolerance.h"

namespace dsv4::model {
namespace {

using testing::max_row_rel_error;

double dot(const float* a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < b.size(); ++i) s += a[i] * b[i];
  return s;
}

// x ⊙ w / sqrt(mean(x²) + eps) in float64.
std::vector<double> rms_norm64(const std::vector<double>& x, const float* w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * w[i];
  return y;
}

// y[n] = W[n, :] · x for W [N, K] f32.
std::vector<double> matvec64(const Tensor& w, const std::vector<double>& x) {
  const int64_t n = w.shape()[0];
  std::vector<double> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) y[i] = dot(w.data_as<float>() + i * w.shape()[1], x);
  return y;
}

class MtpTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    loaded_ = testing::load_with_mtp_block(GetParam(), rng_);
    ASSERT_EQ(loaded_.weights.mtp.size(), 1u);
  }
  const checkpoint::ModelWeights& w() const { return loaded_.weights; }
  const checkpoint::ModelConfig& c() const { return loaded_.weights.config; }

  std::vector<int64_t> random_tokens(int64_t n) {
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (int64_t& id : ids) id = rng_.uniform_int(0, c().vocab_size - 1);
    return ids;
  }

  // The block's input X [n, M, D] in float64, rounded to f32.
  Tensor reference_input(const Tensor& streams, const std::vector<int64_t>& next) const {
    const checkpoint::MtpWeights& mtp = w().mtp[0];
    const int64_t d = c().hidden_size, m = c().hc_mult, n = streams.shape()[0];
    Tensor x = Tensor::host(DType::kF32, streams.shape());
    for (int64_t t = 0; t < n; ++t) {
      const float* row = w().embed.data_as<float>() + next[t] * d;
      const std::vector<double> e = matvec64(
          mtp.e_proj,
          rms_norm64(std::vector<double>(row, row + d), mtp.enorm.data_as<float>(), eps()));
      for (int64_t s = 0; s < m; ++s) {
        const float* h = streams.data_as<float>() + (t * m + s) * d;
        const std::vector<double> hp = matvec64(
            mtp.h_proj,
            rms_norm64(std::vector<double>(h, h + d), mtp.hnorm.data_as<float>(), eps()));
        for (int64_t i = 0; i < d; ++i)
          x.data_as<float>()[(t * m + s) * d + i] = static_cast<float>(e[i] + hp[i]);
      }
    }
    return x;
  }

  // logits [n, V] of the block's output streams X [n, M, D], in float64.
  Tensor reference_logits(const Tensor& x) const {
    const checkpoint::MtpWeights& mtp = w().mtp[0];
    const int64_t d = c().hidden_size, m = c().hc_mult, n = x.shape()[0], v = c().vocab_size;
    Tensor logits = Tensor::host(DType::kF32, {n, v});
    for (int64_t t = 0; t < n; ++t) {
      const float* xt = x.data_as<float>() + t * m * d;
      const std::vector<double> flat(xt, xt + m * d);
      double ss = 0;
      for (double value : flat) ss += value * value;
      const double rho = 1.0 / std::sqrt(ss / static_cast<double>(m * d) + eps());
      std::vector<double> h(static_cast<size_t>(d), 0.0);
      for (int64_t s = 0; s < m; ++s) {
        const double mix = dot(mtp.hc_head.fn.data_as<float>() + s * m * d, flat) * rho;
        const double pre = 1.0 / (1.0 + std::exp(-(mix * mtp.hc_head.scale.data_as<float>()[0] +
                                                   mtp.hc_head.base.data_as<float>()[s]))) +
                           c().hc_eps;
        for (int64_t i = 0; i < d; ++i) h[i] += pre * xt[s * d + i];
      }
      const std::vector<double> out = matvec64(w().head, rms_norm64(h, mtp.norm.data_as<float>(),
                                                                   eps()));
      for (int64_t i = 0; i < v; ++i) logits.data_as<float>()[t * v + i] = static_cast<float>(out[i]);
    }
    return logits;
  }

  // n rows of random streams and tokens, and their logits from one call over a fresh cache.
  struct OneCall {
    Tensor streams;
    std::vector<int64_t> next;
    Tensor logits;
  };
  OneCall one_call(int64_t n) {
    OneCall one{testing::random_values(rng_, {n, c().hc_mult, c().hidden_size}, 0.0, 1.0),
                random_tokens(n), Tensor::host(DType::kF32, {n, c().vocab_size})};
    auto cache = mtp_cache(w(), 0, n);
    EXPECT_TRUE(cache.ok());
    const MtpChunk all{one.streams.view(), one.next, 0, &*cache, one.logits.view()};
    EXPECT_TRUE(
        mtp_forward(w(), 0, ExpertMode::kW4A16, std::span<const MtpChunk>(&all, 1)).ok());
    return one;
  }

  double eps() const { return c().rms_norm_eps; }

  testing::SeededRng rng_;
  checkpoint::LoadedModel loaded_;
};

TEST_P(MtpTest, MatchesTheCompositionAroundItsBlock) {
  const int64_t n = 11, v = c().vocab_size;
  const Tensor streams =
      testing::random_values(rng_, {n, c().hc_mult, c().hidden_size}, 0.0, 1.0);
  const std::vector<int64_t> next = random_tokens(n);

  // The reference: X by hand, the V4 block as layer n_layer over its own fresh cache, the head.
  Tensor x = reference_input(streams, next);
  Tensor spare = Tensor::host(DType::kF32, x.shape());
  auto ref_cache = mtp_cache(w(), 0, 64);
  ASSERT_TRUE(ref_cache.ok()) << ref_cache.status().to_string();
  Tensor tokens = Tensor::host(DType::kI64, {n});
  std::copy(next.begin(), next.end(), tokens.data_as<int64_t>());
  const SequenceRows rows{0, n, 0, &*ref_cache};
  const auto positions =
      RowPositions::of(c(), std::span<const SequenceRows>(&rows, 1), n, Device::kCpu);
  ASSERT_TRUE(positions.ok()) << positions.status().to_string();
  const LayerInput input{.config = &c(),
                         .layer = c().n_layer,
                         .weights = &w().mtp[0].block,
                         .expert_mode = ExpertMode::kW4A16,
                         .tokens = tokens.view(),
                         .sequences = std::span<const SequenceRows>(&rows, 1),
                         .positions = &*positions};
  ASSERT_TRUE(layer_forward(input, x, spare).ok());
  const Tensor want = reference_logits(x);

  auto cache = mtp_cache(w(), 0, 64);
  ASSERT_TRUE(cache.ok());
  Tensor logits = Tensor::host(DType::kF32, {n, v});
  Tensor out_streams = Tensor::host(DType::kF32, streams.shape());
  const MtpChunk chunk{streams.view(), next, 0, &*cache, logits.view(), out_streams.view()};
  const Status ran = mtp_forward(w(), 0, ExpertMode::kW4A16, std::span<const MtpChunk>(&chunk, 1));
  ASSERT_TRUE(ran.ok()) << ran.to_string();
  EXPECT_EQ(cache->n_tokens, n);
  EXPECT_LT(max_row_rel_error(logits.data_as<float>(), want.data_as<float>(), n, v),
            testing::kGoldenLogitsRelTol);
  EXPECT_LT(max_row_rel_error(out_streams.data_as<float>(), x.data_as<float>(),
                              n * c().hc_mult, c().hidden_size),
            testing::kGoldenLogitsRelTol);
}

// Row by row through the cache (decode-like drafting), then two sequences in one call: the
// rows of one call over all.
TEST_P(MtpTest, StepsAndBatchesAgreeWithOneCall) {
  const int64_t n = 2 * c().sliding_window + 3, v = c().vocab_size;
  const auto [streams, next, whole] = one_call(n);

  auto a = mtp_cache(w(), 0, n, 4), b = mtp_cache(w(), 0, n, 4);
  ASSERT_TRUE(a.ok() && b.ok());
  Tensor stepped = Tensor::host(DType::kF32, {n, v});
  for (int64_t t = 0; t < n; ++t) {
    // Sequence a takes row t alone, b the same row beside it: the batch must not mix them.
    const std::span<const int64_t> id(&next[static_cast<size_t>(t)], 1);
    Tensor b_logits = Tensor::host(DType::kF32, {1, v});
    const MtpChunk two[] = {
        {streams.view().rows(t, t + 1), id, t, &*a, stepped.view().rows(t, t + 1)},
        {streams.view().rows(t, t + 1), id, t, &*b, b_logits.view()}};
    ASSERT_TRUE(mtp_forward(w(), 0, ExpertMode::kW4A16, two).ok());
    EXPECT_LT(max_row_rel_error(b_logits.data_as<float>(), stepped.data_as<float>() + t * v, 1, v),
              testing::kStepwiseRelTol);
  }
  EXPECT_LT(max_row_rel_error(stepped.data_as<float>(), whole.data_as<float>(), n, v),
            testing::kStepwiseRelTol);
}

// Two sequences whose streams are scattered rows of one buffer (a verify step's kept rows, which
// rejected drafts separate), one keeping its last row's logits and output streams, the other
// every row's, in one buffer each: gathered in, gathered out, the rows of a call a sequence.
TEST_P(MtpTest, ScatteredRowsAndLastRowsAreThoseOfACallASequence) {
  const int64_t v = c().vocab_size, m = c().hc_mult, d = c().hidden_size;
  const Tensor streams = testing::random_values(rng_, {8, m, d}, 0.0, 1.0);
  const std::vector<int64_t> next = random_tokens(5);
  const std::span<const int64_t> next_a = std::span<const int64_t>(next).first(3);
  const std::span<const int64_t> next_b = std::span<const int64_t>(next).last(2);

  auto a = mtp_cache(w(), 0, 8), b = mtp_cache(w(), 0, 8);
  ASSERT_TRUE(a.ok() && b.ok());
  Tensor logits = Tensor::host(DType::kF32, {3, v});
  Tensor out = Tensor::host(DType::kF32, {3, m, d});
  const MtpChunk two[] = {{streams.view().rows(0, 3), next_a, 0, &*a, logits.view().rows(0, 1),
                           out.view().rows(0, 1)},
                          {streams.view().rows(5, 7), next_b, 0, &*b, logits.view().rows(1, 3),
                           out.view().rows(1, 3)}};
  ASSERT_TRUE(mtp_forward(w(), 0, ExpertMode::kW4A16, two).ok());

  // Each alone, from its own contiguous rows, every row asked.
  const auto alone = [&](int64_t begin, std::span<const int64_t> ids, Tensor& want_logits,
                         Tensor& want_out) {
    const auto n = static_cast<int64_t>(ids.size());
    auto cache = mtp_cache(w(), 0, 8);
    ASSERT_TRUE(cache.ok());
    want_logits = Tensor::host(DType::kF32, {n, v});
    want_out = Tensor::host(DType::kF32, {n, m, d});
    const MtpChunk chunk{streams.view().rows(begin, begin + n), ids, 0, &*cache,
                         want_logits.view(), want_out.view()};
    ASSERT_TRUE(mtp_forward(w(), 0, ExpertMode::kW4A16, std::span<const MtpChunk>(&chunk, 1)).ok());
  };
  Tensor logits_a, out_a, logits_b, out_b;
  alone(0, next_a, logits_a, out_a);
  alone(5, next_b, logits_b, out_b);
  const auto error = [](const Tensor& got, int64_t got_row, const Tensor& want, int64_t want_row,
                        int64_t n_rows) {
    const int64_t width = got.numel() / got.shape()[0];
    return max_row_rel_error(got.data_as<float>() + got_row * width,
                             want.data_as<float>() + want_row * width, n_rows, width);
  };
  EXPECT_LT(error(logits, 0, logits_a, 2, 1), testing::kStepwiseRelTol);
  EXPECT_LT(error(out, 0, out_a, 2, 1), testing::kStepwiseRelTol);
  EXPECT_LT(error(logits, 1, logits_b, 0, 2), testing::kStepwiseRelTol);
  EXPECT_LT(error(out, 1, out_b, 0, 2), testing::kStepwiseRelTol);
}

// Drafting's use of the cache (runtime/speculative.cpp): each step's kept trunk rows, then up to
// three chained rows (the drafts past the first, here on random streams and tokens), which the
// next step rolls back: the trunk rows' logits stay those of one call over them all, across the
// window's wrap-around, so no rolled-back row is seen.
TEST_P(MtpTest, RolledBackDraftRowsLeaveNoTrace) {
  const int64_t n = 2 * c().sliding_window + 5, v = c().vocab_size;
  const auto [streams, next, whole] = one_call(n);

  // Steps of up to 4 kept rows and 3 chained ones: at most 7 rows since the last kept state.
  auto cache = mtp_cache(w(), 0, n + 3, 8);
  ASSERT_TRUE(cache.ok());
  int64_t pos = 0, n_rolled_back = 0;
  while (pos < n) {
    const int64_t r = std::min(rng_.uniform_int(1, 4), n - pos);
    Tensor logits = Tensor::host(DType::kF32, {r, v});
    const MtpChunk kept{streams.view().rows(pos, pos + r),
                        std::span<const int64_t>(next).subspan(static_cast<size_t>(pos),
                                                               static_cast<size_t>(r)),
                        pos, &*cache, logits.view()};
    ASSERT_TRUE(mtp_forward(w(), 0, ExpertMode::kW4A16, std::span<const MtpChunk>(&kept, 1)).ok());
    SCOPED_TRACE("rows " + std::to_string(pos) + " + " + std::to_string(r));
    ASSERT_LT(max_row_rel_error(logits.data_as<float>(), whole.data_as<float>() + pos * v, r, v),
              testing::kStepwiseRelTol);
    pos += r;
    const int64_t n_chained = rng_.uniform_int(0, 3);
    for (int64_t i = 0; i < n_chained; ++i) {
      const Tensor chained =
          testing::random_values(rng_, {1, c().hc_mult, c().hidden_size}, 0.0, 1.0);
      const std::vector<int64_t> id = random_tokens(1);
      Tensor chained_logits = Tensor::host(DType::kF32, {1, v});
      const MtpChunk row{chained.view(), id, cache->n_tokens, &*cache, chained_logits.view()};
      ASSERT_TRUE(mtp_forward(w(), 0, ExpertMode::kW4A16, std::span<const MtpChunk>(&row, 1)).ok());
    }
    ASSERT_TRUE(roll_back(*cache, pos).ok());
    n_rolled_back += n_chained;
  }
  EXPECT_GT(n_rolled_back, 0);
}

TEST_P(MtpTest, BadCallsAreRefusedWithoutTouchingTheCache) {
  const Tensor streams = testing::random_values(rng_, {1, c().hc_mult, c().hidden_size}, 0.0, 1.0);
  auto cache = mtp_cache(w(), 0, 8);
  ASSERT_TRUE(cache.ok());
  Tensor logits = Tensor::host(DType::kF32, {1, c().vocab_size});
  const std::vector<int64_t> bad_id{c().vocab_size};
  const MtpChunk out_of_vocab{streams.view(), bad_id, 0, &*cache, logits.view()};
  Status s = mtp_forward(w(), 0, ExpertMode::kW4A16, std::span<const MtpChunk>(&out_of_vocab, 1));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("outside the vocabulary"), std::string::npos) << s.message();
  const std::vector<int64_t> id{0};
  const MtpChunk gap{streams.view(), id, 3, &*cache, logits.view()};
  s = mtp_forward(w(), 0, ExpertMode::kW4A16, std::span<const MtpChunk>(&gap, 1));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "MTP start_pos 3 does not continue a cache of 0 tokens");
  EXPECT_EQ(cache->n_tokens, 0);
}

INSTANTIATE_TEST_SUITE_P(Golden, MtpTest,
                         ::testing::Values("tiny_a_state_dict", "tiny_b_state_dict",
                                           "tiny_c_pretrained", "tiny_d_state_dict",
                                           "tiny_e_pretrained"));

}  // namespace
}  // namespace dsv4::model

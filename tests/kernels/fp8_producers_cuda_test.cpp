// The producers of an FP8 linear's input fused with the quantizer (kernels/ops.h, "FP8"; label
// cuda: needs the GPU): each fused op's output and FP8 form must be the bytes of the device's
// plain op followed by quantize_activation_fp8, on fresh random rows at T = 1, 8, 64, 2048 and
// the widths V4-Flash feeds its FP8 linears (4096: the block input of wq_a, wkv and the shared
// expert; 1024: q_latent of the two wq_b; 2048: the shared expert's hidden of w2), plus widths off
// the 128-column groups (1000; 1500, a block's two passes), V4-Pro's 7168, and rows too wide for
// the fused kernels (the two ops); rope_fp8 on the attention output before wo_a ([T, 64·512]).
// rms_norm_fp8 must also give the CPU's bytes (rms_norm and the quantizer are bit-identical on
// both devices). Every output starts poisoned, so an element or scale a kernel skips shows.
//
// Dimension letters: T tokens, D row width, F expert width, M streams, Kb = ceil(D/128).
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/buffer.h"
#include "fp8_linear_case.h"
#include "kernels/cuda_op_pair.h"
#include "kernels/hc_pre_norm_case.h"
#include "kernels/ops.h"
#include "testing/device.h"
#include "testing/random.h"

namespace dsv4::kernels {
namespace {

using testing::OpPair;
using testing::same_bytes;
using testing::SeededRng;
using testing::to_host;

// An Fp8Activation [T, D] on both devices, poisoned.
struct Fp8Pair {
  OpPair values, scales;
  Fp8Pair(int64_t t, int64_t d)
      : values(OpPair::poisoned(DType::kF8E4M3, {t, d})),
        scales(OpPair::poisoned(DType::kF32, {t, testing::fp8_group_count(d)})) {}
  Fp8Activation h() const { return {values.h(), scales.h()}; }
  Fp8Activation d() const { return {values.d(), scales.d()}; }
};

// The device's codes and scales in `a` against those in `b`, byte for byte.
void expect_same_device_bytes(const Fp8Pair& a, const Fp8Pair& b) {
  EXPECT_TRUE(same_bytes(a.values.result().view(), b.values.result().view()));
  EXPECT_TRUE(same_bytes(a.scales.result().view(), b.scales.result().view()));
}

// Rows whose 128-column groups differ in magnitude (so their scales do), with one group of zeros
// in row 0 (the amax floor's scale) where the row has a second group.
OpPair fp8_rows(SeededRng& rng, int64_t t, int64_t d) {
  Tensor x = testing::fp8_random_activation(rng, t, d);
  for (int64_t k = 128; k < d && k < 256; ++k) x.data_as<float>()[k] = 0.0f;
  return OpPair::of(std::move(x));
}

const int64_t kTokens[] = {1, 8, 64, 2048};

TEST(Fp8ProducersCuda, RmsNormFp8GivesTheBytesOfTheNormThenTheQuantizer) {
  SeededRng rng;
  for (const int64_t t : kTokens) {
    for (const int64_t d : {4096, 1024, 2048, 1000, 1500, 7168, 40000}) {
      if (d == 40000 && t > 8) continue;  // the two ops' path: a few rows show it
      SCOPED_TRACE("T=" + std::to_string(t) + " D=" + std::to_string(d));
      const OpPair x = fp8_rows(rng, t, d);
      const OpPair weight = OpPair::uniform(rng, {d}, 0.5, 1.5);
      const TensorView no_weight{};
      for (const bool weighted : {true, false}) {
        if (!weighted && t > 8) continue;
        const OpPair y = OpPair::poisoned(DType::kF32, {t, d});
        const OpPair y_parts = OpPair::poisoned(DType::kF32, {t, d});
        Fp8Pair q(t, d), q_parts(t, d);
        const TensorView w_h = weighted ? weight.h() : no_weight;
        const TensorView w_d = weighted ? weight.d() : no_weight;
        ASSERT_TRUE(rms_norm_fp8(x.d(), w_d, 1e-6f, y.d(), q.d()).ok());
        ASSERT_TRUE(rms_norm(x.d(), w_d, 1e-6f, y_parts.d()).ok());
        ASSERT_TRUE(quantize_activation_fp8(y_parts.d(), q_parts.d()).ok());
        EXPECT_TRUE(same_bytes(y.result().view(), y_parts.result().view()));
        expect_same_device_bytes(q, q_parts);
        // The CPU's composition gives the same bytes.
        ASSERT_TRUE(rms_norm_fp8(x.h(), w_h, 1e-6f, y.h(), q.h()).ok());
        EXPECT_TRUE(testing::device_equals_host(y));
        EXPECT_TRUE(testing::device_equals_host(q.values));
        EXPECT_TRUE(testing::device_equals_host(q.scales));
      }
    }
  }
}

// In place, as the model norms q_latent: y aliases x.
TEST(Fp8ProducersCuda, RmsNormFp8InPlaceGivesTheSameBytes) {
  SeededRng rng;
  for (const auto& [t, d] : {std::tuple{8, 1024}, {3, 4096}}) {
    SCOPED_TRACE("T=" + std::to_string(t) + " D=" + std::to_string(d));
    const OpPair x = fp8_rows(rng, t, d);
    const OpPair weight = OpPair::uniform(rng, {d}, 0.5, 1.5);
    const OpPair in_place = OpPair::of(to_host(x.d()));
    const OpPair y = OpPair::poisoned(DType::kF32, {t, d});
    Fp8Pair q(t, d), q_in_place(t, d);
    ASSERT_TRUE(rms_norm_fp8(x.d(), weight.d(), 1e-6f, y.d(), q.d()).ok());
    ASSERT_TRUE(rms_norm_fp8(in_place.d(), weight.d(), 1e-6f, in_place.d(), q_in_place.d()).ok());
    EXPECT_TRUE(same_bytes(y.result().view(), in_place.result().view()));
    expect_same_device_bytes(q, q_in_place);
  }
}

// The device's swiglu differs from the CPU's by expf's last ulp, so the reference is the device's
// swiglu, then the quantizer. Clamped (V4's limit) and not.
TEST(Fp8ProducersCuda, SwigluFp8GivesTheBytesOfSwigluThenTheQuantizer) {
  SeededRng rng;
  for (const int64_t t : kTokens) {
    for (const int64_t f : {2048, 4096, 1000}) {
      for (const float limit : {10.0f, 0.0f}) {
        SCOPED_TRACE("T=" + std::to_string(t) + " F=" + std::to_string(f) +
                     " limit=" + std::to_string(limit));
        const OpPair gate_up = OpPair::uniform(rng, {t, 2 * f}, -12.0, 12.0);
        const OpPair out = OpPair::poisoned(DType::kF32, {t, f});
        const OpPair out_parts = OpPair::poisoned(DType::kF32, {t, f});
        Fp8Pair q(t, f), q_parts(t, f);
        ASSERT_TRUE(swiglu_fp8(gate_up.d(), limit, out.d(), q.d()).ok());
        ASSERT_TRUE(swiglu(gate_up.d(), limit, out_parts.d()).ok());
        ASSERT_TRUE(quantize_activation_fp8(out_parts.d(), q_parts.d()).ok());
        EXPECT_TRUE(same_bytes(out.result().view(), out_parts.result().view()));
        expect_same_device_bytes(q, q_parts);
      }
    }
  }
}

// The attention output's inverse RoPE before wo_a: V4-Flash's 64 heads of 512 with 32 pairs, and
// heads of 130 with 3 pairs (groups across heads, a row off the groups); rope's turns are the
// device's own, so the reference is the device's rope, then the quantizer, on a copy of x.
TEST(Fp8ProducersCuda, RopeFp8GivesTheBytesOfRopeThenTheQuantizer) {
  SeededRng rng;
  for (const int64_t t : kTokens) {
    for (const auto& [h, dh, p] : {std::tuple{64, 512, 32}, {3, 130, 3}}) {
      SCOPED_TRACE("T=" + std::to_string(t) + " H=" + std::to_string(h) +
                   " Dh=" + std::to_string(dh));
      const int64_t d = h * dh;
      const OpPair x = fp8_rows(rng, t, d);
      const OpPair x_parts = OpPair::of(to_host(x.d()));
      std::vector<int64_t> positions(static_cast<size_t>(t));
      for (int64_t& position : positions) position = rng.uniform_int(0, 1 << 20);
      const OpPair at = OpPair::values(DType::kI64, {t}, positions);
      const OpPair inv_freq = OpPair::uniform(rng, {p}, 1e-4, 1.0);
      Fp8Pair q(t, d), q_parts(t, d);
      ASSERT_TRUE(
          rope_fp8(x.d().reshaped({t, h, dh}), at.d(), inv_freq.d(), RopeDirection::kInverse, q.d())
              .ok());
      ASSERT_TRUE(
          rope(x_parts.d().reshaped({t, h, dh}), at.d(), inv_freq.d(), RopeDirection::kInverse)
              .ok());
      ASSERT_TRUE(quantize_activation_fp8(x_parts.d(), q_parts.d()).ok());
      EXPECT_TRUE(same_bytes(x.result().view(), x_parts.result().view()));
      expect_same_device_bytes(q, q_parts);
    }
  }
}

// The fused mHC pre side (one cluster a token; its Sinkhorn matches the CPU's to the device
// expf's ulps, so the reference is the device's hc_pre_norm, then the quantizer). M = 4 at the
// decode widths, V4-Pro's width, one past the fused kernel's registers, and M = 3 (the parts).
TEST(Fp8ProducersCuda, HcPreNormFp8GivesTheBytesOfHcPreNormThenTheQuantizer) {
  SeededRng rng;
  for (const auto& [t, m, d] : {std::tuple{1, 4, 4096},
                                {8, 4, 4096},
                                {64, 4, 4096},
                                {2048, 4, 4096},
                                {2, 4, 7168},
                                {2, 4, 40000},
                                {5, 3, 1000}}) {
    SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(m) + "x" + std::to_string(d));
    const testing::HcPreNormInputs in(rng, t, m, d);
    const auto poisoned = [&](Shape shape) { return OpPair::poisoned(DType::kF32, shape); };
    // One site's outputs: the mixes and the block input.
    struct Site {
      OpPair pre, post, comb, y;
    };
    const auto site = [&] {
      return Site{poisoned({t, m}), poisoned({t, m}), poisoned({t, m, m}), poisoned({t, d})};
    };
    const auto params = [&](const Site& s) { return in.params(true, s.pre, s.post, s.comb, s.y); };
    const Site fused = site(), parts = site();
    Fp8Pair q(t, d), q_parts(t, d);
    ASSERT_TRUE(hc_pre_norm_fp8(params(fused), q.d()).ok());
    ASSERT_TRUE(hc_pre_norm(params(parts)).ok());
    ASSERT_TRUE(quantize_activation_fp8(parts.y.d(), q_parts.d()).ok());
    for (const auto& [a, b] : {std::pair{&fused.pre, &parts.pre},
                               {&fused.post, &parts.post},
                               {&fused.comb, &parts.comb},
                               {&fused.y, &parts.y}}) {
      EXPECT_TRUE(same_bytes(a->result().view(), b->result().view()));
    }
    expect_same_device_bytes(q, q_parts);
  }
}

}  // namespace
}  // namespace dsv4::kernels

// format/nvfp4: quantize_ref against the independent float64 quantizer (bit-exact codes and
// scales), dequantization error bounds, the swizzled layout's known offsets and exact round
// trip, the global-scale conventions, and the reason the global scale is never folded.
#include "format/nvfp4.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "testing/nvfp4_reference.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4::format {
namespace {

using dsv4::testing::SeededRng;

// Random values whose 16-blocks span many magnitudes (so scales hit the UE4M3 subnormals and
// saturate), never zero.
std::vector<float> random_blocks(SeededRng& rng, int64_t n, double log2_lo, double log2_hi) {
  std::vector<float> x(n);
  std::normal_distribution<double> normal(0.0, 1.0);
  double block_scale = 1.0;
  for (int64_t i = 0; i < n; ++i) {
    if (i % kNvfp4BlockSize == 0) block_scale = std::exp2(rng.uniform(log2_lo, log2_hi));
    double v = normal(rng.engine()) * block_scale;
    if (v == 0.0) v = block_scale;
    x[i] = static_cast<float>(v);
  }
  return x;
}

uint8_t code_at(const Nvfp4Tensor& t, int64_t element) {
  const uint8_t byte = t.packed.data_as<uint8_t>()[element / 2];
  return element % 2 == 0 ? (byte & 0xf) : (byte >> 4);
}

TEST(Nvfp4Test, GlobalScaleConventions) {
  const GlobalScale s = GlobalScale::from_amax(13.5f);
  EXPECT_EQ(s.decode, 13.5f / 2688.0f);  // ModelOpt weight_scale_2 = amax / (6 · 448)
  EXPECT_EQ(s.encode, 1.0f / s.decode);
  EXPECT_EQ(GlobalScale::from_decode(0.25f).encode, 4.0f);
  EXPECT_EQ(GlobalScale::from_decode(0.25f).decode, 0.25f);   // a static input_scale is kept as is
  EXPECT_EQ(GlobalScale::from_amax(0.0f).encode, 1.0f);       // all-zero tensor: no 0 · inf
  EXPECT_EQ(GlobalScale::from_amax(1e-37f).encode, FLT_MAX);  // reciprocal overflow clamps
}

TEST(Nvfp4Test, QuantizeMatchesFloat64ReferenceBitExactly) {
  SeededRng rng;
  struct Case {
    int64_t g, n, k;
  };
  for (const Case c : {Case{1, 1, 16}, Case{1, 7, 48}, Case{3, 33, 80}, Case{2, 130, 208}}) {
    const std::vector<float> x = random_blocks(rng, c.g * c.n * c.k, -14.0, 4.0);
    std::vector<GlobalScale> scales;
    for (int64_t g = 0; g < c.g; ++g) {
      const float amax = amax_abs(x.data() + g * c.n * c.k, c.n * c.k);
      const float decode = static_cast<float>(double(amax) / 2688.0);
      const float encode = static_cast<float>(1.0 / double(decode));
      scales.push_back(GlobalScale::from_amax(amax));
      ASSERT_EQ(scales.back().decode, decode);
      ASSERT_EQ(scales.back().encode, encode);
    }
    Result<Nvfp4Tensor> t = quantize_ref(x.data(), c.g, c.n, c.k, scales);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    const int64_t n_blocks = c.g * c.n * c.k / kNvfp4BlockSize;
    int64_t mismatches = 0;
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int64_t g = b / (c.n * c.k / kNvfp4BlockSize);
      const dsv4::testing::ReferenceBlock ref =
          dsv4::testing::reference_quantize_block(x.data() + b * 16, scales[g].encode);
      mismatches += t->block_scale.data_as<uint8_t>()[b] != ref.scale;
      for (int i = 0; i < 16; ++i) mismatches += code_at(*t, b * 16 + i) != ref.codes[i];
    }
    EXPECT_EQ(mismatches, 0) << "G=" << c.g << " N=" << c.n << " K=" << c.k;
    for (int64_t g = 0; g < c.g; ++g)
      EXPECT_EQ(t->global_scale.data_as<float>()[g], scales[g].decode);
  }
}

// |x̂ − x| ≤ half the widest E2M1 gap (1, between 4 and 6) times the block's step sf · decode;
// a saturated element (scale rounded down by ≤ 2^-4) errs by ≤ 6·2^-4 of it, less than that.
// A block whose scale underflows to 0 has |x| < 6·2^-10 · decode.
TEST(Nvfp4Test, DequantizeErrorIsBoundedPerBlock) {
  SeededRng rng;
  const int64_t n = 64, k = 112;
  const std::vector<float> x = random_blocks(rng, n * k, -16.0, 6.0);
  const GlobalScale s = GlobalScale::from_amax(amax_abs(x.data(), n * k));
  Result<Nvfp4Tensor> t = quantize_ref(x.data(), n, k, s);
  ASSERT_TRUE(t.ok());
  Result<Tensor> back = dequantize_ref(t->view());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  for (int64_t i = 0; i < n * k; ++i) {
    const double sf = e4m3_to_float(t->block_scale.data_as<uint8_t>()[i / 16]);
    const double bound = std::fmax(sf, 6.0 / 1024.0) * s.decode * (1 + 1e-6);
    ASSERT_LE(std::fabs(double(back->data_as<float>()[i]) - x[i]), bound) << "element " << i;
  }
}

// Relative RMS error of Gaussian weights at any σ (nvfp4.md §5.2: 0.095), and what folding the
// global scale into the UE4M3 block scales does to small-σ weights (§5.3): their folded scales
// fall into E4M3 subnormals or flush to zero, while the alpha path does not care about σ.
double rms_error(const std::vector<float>& x, const std::vector<double>& approx) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (approx[i] - x[i]) * (approx[i] - x[i]);
    ref += double(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

TEST(Nvfp4Test, FoldingTheGlobalScaleUnderflowsWhereAlphaDoesNot) {
  SeededRng rng;
  const int64_t n = 128, k = 512;
  for (const double sigma : {1.0, 0.01, 0.001}) {
    std::vector<float> x(n * k);
    std::normal_distribution<double> normal(0.0, sigma);
    for (float& v : x) v = static_cast<float>(normal(rng.engine()));
    const GlobalScale s = GlobalScale::from_amax(amax_abs(x.data(), n * k));
    Result<Nvfp4Tensor> t = quantize_ref(x.data(), n, k, s);
    ASSERT_TRUE(t.ok());
    std::vector<double> with_alpha(n * k), folded(n * k);
    for (int64_t i = 0; i < n * k; ++i) {
      const uint8_t sf = t->block_scale.data_as<uint8_t>()[i / 16];
      const float e = e2m1_to_float(code_at(*t, i));
      with_alpha[i] = double(e) * e4m3_to_float(sf) * s.decode;  // alpha in the epilogue
      folded[i] = double(e) * e4m3_to_float(float_to_e4m3(e4m3_to_float(sf) * s.decode));
    }
    const double alpha_error = rms_error(x, with_alpha), folded_error = rms_error(x, folded);
    EXPECT_LT(alpha_error, dsv4::testing::kNvfp4WeightRelRmsTol) << "sigma " << sigma;
    if (sigma <= 0.001) {
      EXPECT_GT(folded_error, 0.9) << "sigma " << sigma;  // nearly every block flushed to zero
    } else if (sigma <= 0.01) {
      EXPECT_GT(folded_error, alpha_error * 1.1) << "sigma " << sigma;
    }
  }
}

// Offsets straight from nvfp4.md §2.1's formula for a 300 × 10-scale-column matrix (3 row
// tiles, 3 K tiles).
TEST(Nvfp4Test, SwizzledOffsetsMatchTheDocumentedAtoms) {
  const ScaleLayout s = ScaleLayout::kSwizzled128x4;
  const int64_t n_kb = 10;  // ceil(10/4) = 3 K tiles
  EXPECT_EQ(scale_offset(s, 0, 0, n_kb), 0);
  EXPECT_EQ(scale_offset(s, 0, 3, n_kb), 3);
  EXPECT_EQ(scale_offset(s, 1, 0, n_kb), 16);
  EXPECT_EQ(scale_offset(s, 32, 0, n_kb), 4);
  EXPECT_EQ(scale_offset(s, 96, 1, n_kb), 13);
  EXPECT_EQ(scale_offset(s, 31, 2, n_kb), 31 * 16 + 2);
  EXPECT_EQ(scale_offset(s, 0, 4, n_kb), 512);
  EXPECT_EQ(scale_offset(s, 0, 9, n_kb), 2 * 512 + 1);
  EXPECT_EQ(scale_offset(s, 128, 0, n_kb), 3 * 512);
  EXPECT_EQ(scale_offset(s, 299, 9, n_kb), (2 * 3 + 2) * 512 + (299 % 32) * 16 + 1 * 4 + 1);
  EXPECT_EQ(padded_scale_rows(s, 300), 384);
  EXPECT_EQ(padded_scale_cols(s, 10), 12);
  EXPECT_EQ(scale_offset(ScaleLayout::kLinear, 5, 7, n_kb), 57);
  // A bijection onto the padded buffer's logical cells.
  std::set<int64_t> seen;
  for (int64_t r = 0; r < 300; ++r) {
    for (int64_t kb = 0; kb < n_kb; ++kb) {
      const int64_t o = scale_offset(s, r, kb, n_kb);
      ASSERT_LT(o, 384 * 12);
      ASSERT_TRUE(seen.insert(o).second) << r << ", " << kb;
    }
  }
}

TEST(Nvfp4Test, SwizzleRoundTripIsExactAndPadsWithZeros) {
  SeededRng rng;
  const int64_t g = 2, n = 150, n_kb = 5;
  Tensor linear = Tensor::host(DType::kU8, {g, n, n_kb});
  for (int64_t i = 0; i < linear.numel(); ++i) {
    linear.data_as<uint8_t>()[i] = static_cast<uint8_t>(rng.uniform_int(1, 126));
  }
  Result<Tensor> swizzled = to_swizzled(linear.view());
  ASSERT_TRUE(swizzled.ok());
  EXPECT_EQ(swizzled->shape(), Shape({g, 256, 8}));
  int64_t zeros = 0;
  for (int64_t i = 0; i < swizzled->numel(); ++i) zeros += swizzled->data_as<uint8_t>()[i] == 0;
  EXPECT_EQ(zeros, g * (256 * 8 - n * n_kb));  // every logical scale is non-zero
  EXPECT_EQ(
      swizzled
          ->data_as<uint8_t>()[256 * 8 + scale_offset(ScaleLayout::kSwizzled128x4, 149, 4, n_kb)],
      linear.data_as<uint8_t>()[n * n_kb + 149 * n_kb + 4]);
  Result<Tensor> back = to_linear(swizzled->view(), n, n_kb);
  ASSERT_TRUE(back.ok());
  for (int64_t i = 0; i < linear.numel(); ++i) {
    ASSERT_EQ(back->data_as<uint8_t>()[i], linear.data_as<uint8_t>()[i]) << i;
  }
}

TEST(Nvfp4Test, DequantizeAgreesAcrossScaleLayouts) {
  SeededRng rng;
  const std::vector<float> x = random_blocks(rng, 2 * 40 * 48, -3.0, 3.0);
  const GlobalScale s = GlobalScale::from_amax(amax_abs(x.data(), x.size()));
  Result<Nvfp4Tensor> t = quantize_ref(x.data(), 2, 40, 48, {s, s});
  ASSERT_TRUE(t.ok());
  Result<Tensor> linear = dequantize_ref(t->view());
  ASSERT_TRUE(set_scale_layout(*t, ScaleLayout::kSwizzled128x4).ok());
  Result<Tensor> swizzled = dequantize_ref(t->view());
  ASSERT_TRUE(linear.ok() && swizzled.ok());
  for (int64_t i = 0; i < linear->numel(); ++i) {
    ASSERT_EQ(linear->data_as<float>()[i], swizzled->data_as<float>()[i]) << i;
  }
  ASSERT_TRUE(set_scale_layout(*t, ScaleLayout::kLinear).ok());
  EXPECT_EQ(t->block_scale.shape(), Shape({2, 40, 3}));
}

TEST(Nvfp4Test, RejectsKNotAMultipleOf16AndMismatchedViews) {
  const std::vector<float> x(3 * 24, 1.0f);
  Result<Nvfp4Tensor> t = quantize_ref(x.data(), 3, 24, GlobalScale{});
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find("multiple of 16"), std::string::npos);
  EXPECT_FALSE(quantize_ref(x.data(), 2, 1, 16, {GlobalScale{}}).ok());  // one scale for two

  Result<Nvfp4Tensor> good = quantize_ref(x.data(), 1, 3, 16, {GlobalScale{}});
  ASSERT_TRUE(good.ok());
  Nvfp4View view = good->view();
  EXPECT_TRUE(validate_nvfp4(view, "w").ok());
  view.scale_layout = ScaleLayout::kSwizzled128x4;  // scales are still [1, 3, 1]
  EXPECT_EQ(validate_nvfp4(view, "w").code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(to_linear(good->block_scale.view(), 3, 1).ok());
}

}  // namespace
}  // namespace dsv4::format

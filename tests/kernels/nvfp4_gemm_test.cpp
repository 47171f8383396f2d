// The NVFP4 ops through kernels/ops.h on the CPU: stage_activation bit-exact against the float64
// reference quantizer, and the GEMMs (W4A4 and W4A16, dense and grouped, f32 and bf16 output)
// against a float64 product of the dequantized operands. Awkward shapes throughout: T = 1, T
// and N not multiples of 128, K = 16·odd, empty groups, every row in one group. Outputs are
// poisoned (NaN, 0xab bytes) before each run so unwritten elements show.
//
// Dimension letters: T tokens, N output features, K input features, G experts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "format/nvfp4.h"
#include "kernels/ops.h"
#include "testing/compare.h"
#include "testing/nvfp4_reference.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4::kernels {
namespace {

using dsv4::testing::SeededRng;
using format::GlobalScale;
using format::ScaleLayout;

// Gaussian values with a per-16-block magnitude spread, never zero.
std::vector<float> random_values(SeededRng& rng, int64_t n, double sigma) {
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<float> x(n);
  double block = sigma;
  for (int64_t i = 0; i < n; ++i) {
    if (i % 16 == 0) block = sigma * std::exp2(rng.uniform(-3.0, 3.0));
    const double v = normal(rng.engine()) * block;
    x[i] = static_cast<float>(v != 0.0 ? v : block);
  }
  return x;
}

// G weight matrices [G, N, K], each with its own magnitude and hence its own global scale.
format::Nvfp4Tensor random_weights(SeededRng& rng, int64_t g, int64_t n, int64_t k,
                                   ScaleLayout layout) {
  std::vector<float> w;
  std::vector<GlobalScale> scales;
  for (int64_t e = 0; e < g; ++e) {
    const std::vector<float> m = random_values(rng, n * k, std::exp2(rng.uniform(-10.0, 2.0)));
    scales.push_back(GlobalScale::from_amax(format::amax_abs(m.data(), n * k)));
    w.insert(w.end(), m.begin(), m.end());
  }
  Result<format::Nvfp4Tensor> t = format::quantize_ref(w.data(), g, n, k, scales);
  DSV4_CHECK(t.ok(), "quantize_ref failed");
  DSV4_CHECK(format::set_scale_layout(*t, layout).ok(), "set_scale_layout failed");
  return std::move(t).value();
}

// An NVFP4 matrix's values in float64 from its bytes, with the reference codec.
std::vector<double> reference_decode(const uint8_t* packed, const uint8_t* scales,
                                     ScaleLayout layout, int64_t n, int64_t k, double decode) {
  std::vector<double> out(n * k);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      const uint8_t byte = packed[(r * k + c) / 2];
      const uint8_t code = c % 2 == 0 ? (byte & 0xf) : (byte >> 4);
      const uint8_t sf = scales[format::scale_offset(layout, r, c / 16, k / 16)];
      out[r * k + c] = dsv4::testing::reference_value(code, sf) * decode;
    }
  }
  return out;
}

// A staged activation with its own (poisoned) storage.
struct StagedStorage {
  Tensor packed, block_scale, global_scale;
  StagedActivation view;
  StagedStorage(int64_t t, int64_t k, ScaleLayout layout)
      : packed(Tensor::host(DType::kU8, {t, k / 2})),
        block_scale(Tensor::host(DType::kU8, {format::padded_scale_rows(layout, t),
                                              format::padded_scale_cols(layout, k / 16)})),
        global_scale(Tensor::host(DType::kF32, {1})) {
    std::memset(packed.data_as<uint8_t>(), 0xab, packed.numel());
    std::memset(block_scale.data_as<uint8_t>(), 0xab, block_scale.numel());
    global_scale.data_as<float>()[0] = std::numeric_limits<float>::quiet_NaN();
    view = StagedActivation{packed.view(), block_scale.view(), global_scale.view(), layout};
  }
};

Tensor to_bf16(const std::vector<float>& x, Shape shape) {
  Tensor t = Tensor::host(DType::kBF16, shape);
  for (size_t i = 0; i < x.size(); ++i) t.data_as<uint16_t>()[i] = float_to_bf16(x[i]);
  return t;
}

Tensor poisoned_output(DType dtype, int64_t t, int64_t n) {
  Tensor d = Tensor::host(dtype, {t, n});
  for (int64_t i = 0; i < d.numel(); ++i) {
    if (dtype == DType::kF32)
      d.data_as<float>()[i] = std::numeric_limits<float>::quiet_NaN();
    else
      d.data_as<uint16_t>()[i] = 0x7fc0;  // bf16 NaN
  }
  return d;
}

std::vector<double> output_values(const Tensor& d) {
  std::vector<double> out(d.numel());
  for (int64_t i = 0; i < d.numel(); ++i) {
    out[i] =
        d.dtype() == DType::kF32 ? d.data_as<float>()[i] : bf16_to_float(d.data_as<uint16_t>()[i]);
  }
  return out;
}

TEST(Nvfp4StageTest, MatchesFloat64ReferenceBitExactly) {
  SeededRng rng;
  struct Case {
    int64_t t, k;
  };
  for (const Case c : {Case{1, 16}, Case{7, 48}, Case{130, 208}}) {
    for (const bool dynamic : {true, false}) {
      for (const DType dtype : {DType::kF32, DType::kBF16}) {
        SCOPED_TRACE("T=" + std::to_string(c.t) + " K=" + std::to_string(c.k) +
                     (dynamic ? " dynamic " : " static ") + std::string(dtype_name(dtype)));
        std::vector<float> x = random_values(rng, c.t * c.k, 1.0);
        Tensor bf16 = to_bf16(x, {c.t, c.k});
        if (dtype == DType::kBF16) {
          for (size_t i = 0; i < x.size(); ++i) x[i] = bf16_to_float(bf16.data_as<uint16_t>()[i]);
        }
        Tensor f32 = Tensor::host(DType::kF32, {c.t, c.k});
        std::memcpy(f32.data_as<float>(), x.data(), x.size() * sizeof(float));
        // Static: a calibrated scale below the live amax, so some blocks saturate at 448.
        Tensor input_scale = Tensor::host(DType::kF32, {1});
        input_scale.data_as<float>()[0] = format::amax_abs(x.data(), x.size()) / 4000.0f;
        const float decode = dynamic
                                 ? static_cast<float>(format::amax_abs(x.data(), x.size()) / 2688.0)
                                 : input_scale.data_as<float>()[0];
        const float encode = static_cast<float>(1.0 / double(decode));

        StagedStorage out(c.t, c.k, ScaleLayout::kLinear);
        const TensorView in_scale = dynamic ? TensorView{} : input_scale.view();
        ASSERT_TRUE(
            stage_activation(dtype == DType::kF32 ? f32.view() : bf16.view(), in_scale, out.view)
                .ok());
        EXPECT_EQ(out.global_scale.data_as<float>()[0], decode);
        int64_t mismatches = 0;
        for (int64_t b = 0; b < c.t * c.k / 16; ++b) {
          const dsv4::testing::ReferenceBlock ref =
              dsv4::testing::reference_quantize_block(x.data() + b * 16, encode);
          mismatches += out.block_scale.data_as<uint8_t>()[b] != ref.scale;
          for (int i = 0; i < 16; ++i) {
            const uint8_t byte = out.packed.data_as<uint8_t>()[b * 8 + i / 2];
            mismatches += (i % 2 == 0 ? (byte & 0xf) : (byte >> 4)) != ref.codes[i];
          }
        }
        EXPECT_EQ(mismatches, 0);
      }
    }
  }
}

TEST(Nvfp4StageTest, SwizzledScalesAreTheLinearOnesSwizzled) {
  SeededRng rng;
  const int64_t t = 130, k = 80;
  const std::vector<float> x = random_values(rng, t * k, 0.3);
  Tensor f32 = Tensor::host(DType::kF32, {t, k});
  std::memcpy(f32.data_as<float>(), x.data(), x.size() * sizeof(float));
  StagedStorage linear(t, k, ScaleLayout::kLinear), swizzled(t, k, ScaleLayout::kSwizzled128x4);
  ASSERT_TRUE(stage_activation(f32.view(), TensorView{}, linear.view).ok());
  ASSERT_TRUE(stage_activation(f32.view(), TensorView{}, swizzled.view).ok());
  Result<Tensor> expected = format::to_swizzled(linear.block_scale.view().reshaped({1, t, k / 16}));
  ASSERT_TRUE(expected.ok());
  ASSERT_EQ(expected->numel(), swizzled.block_scale.numel());
  EXPECT_EQ(std::memcmp(expected->data_as<uint8_t>(), swizzled.block_scale.data_as<uint8_t>(),
                        expected->numel()),
            0);  // padding included: zeros, not the poison
  EXPECT_EQ(std::memcmp(linear.packed.data_as<uint8_t>(), swizzled.packed.data_as<uint8_t>(),
                        linear.packed.numel()),
            0);
}

// One GEMM problem: A [T, K] either staged (W4A4) or dense f32/bf16 (W4A16), B [G, N, K],
// rows grouped by `offsets` (G = 1 and offsets {0, T} for the dense op).
struct GemmCase {
  int64_t t, n, k, g;
  bool w4a4;
  DType a_dtype, d_dtype;
  ScaleLayout layout;
};

std::string describe(const GemmCase& c) {
  return "T=" + std::to_string(c.t) + " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) +
         " G=" + std::to_string(c.g) + (c.w4a4 ? " W4A4" : " W4A16 a=") +
         (c.w4a4 ? "" : std::string(dtype_name(c.a_dtype))) +
         " d=" + std::string(dtype_name(c.d_dtype)) +
         (c.layout == ScaleLayout::kLinear ? " linear" : " swizzled");
}

// Runs the case through ops.h and checks it against float64; `offsets` has G + 1 entries.
void run_gemm_case(SeededRng& rng, const GemmCase& c, const std::vector<int32_t>& offsets) {
  SCOPED_TRACE(describe(c));
  const format::Nvfp4Tensor b = random_weights(rng, c.g, c.n, c.k, c.layout);
  const std::vector<float> x = random_values(rng, c.t * c.k, 1.0);
  Tensor a_dense =
      c.a_dtype == DType::kBF16 ? to_bf16(x, {c.t, c.k}) : Tensor::host(DType::kF32, {c.t, c.k});
  if (c.a_dtype == DType::kF32) std::memcpy(a_dense.data_as<float>(), x.data(), x.size() * 4);
  StagedStorage staged(c.t, c.k, c.layout);
  std::vector<double> a_ref(c.t * c.k);
  if (c.w4a4) {
    ASSERT_TRUE(stage_activation(a_dense.view(), TensorView{}, staged.view).ok());
    a_ref =
        reference_decode(staged.packed.data_as<uint8_t>(), staged.block_scale.data_as<uint8_t>(),
                         c.layout, c.t, c.k, staged.global_scale.data_as<float>()[0]);
  } else {
    for (int64_t i = 0; i < c.t * c.k; ++i) {
      a_ref[i] = c.a_dtype == DType::kF32 ? x[i] : bf16_to_float(a_dense.data_as<uint16_t>()[i]);
    }
  }
  // Reference: float64 Σ_k over the decoded operands, expert g for rows of group g.
  std::vector<double> d_ref(c.t * c.n);
  const int64_t scale_bytes = b.block_scale.numel() / c.g;
  for (int64_t g = 0; g < c.g; ++g) {
    const std::vector<double> w =
        reference_decode(b.packed.data_as<uint8_t>() + g * c.n * c.k / 2,
                         b.block_scale.data_as<uint8_t>() + g * scale_bytes, c.layout, c.n, c.k,
                         b.global_scale.data_as<float>()[g]);
    for (int64_t r = offsets[g]; r < offsets[g + 1]; ++r) {
      for (int64_t n = 0; n < c.n; ++n) {
        double sum = 0;
        for (int64_t k = 0; k < c.k; ++k) sum += a_ref[r * c.k + k] * w[n * c.k + k];
        d_ref[r * c.n + n] = sum;
      }
    }
  }
  Tensor d = poisoned_output(c.d_dtype, c.t, c.n);
  Tensor offsets_t = Tensor::host(DType::kI32, {c.g + 1});
  std::memcpy(offsets_t.data_as<int32_t>(), offsets.data(), offsets.size() * sizeof(int32_t));
  const bool grouped = c.g > 1;
  Status status;
  if (c.w4a4) {
    status = grouped ? nvfp4_grouped_gemm(staged.view, b.view(), offsets_t.view(), d.view())
                     : nvfp4_gemm(staged.view, b.view(), d.view());
  } else {
    status = grouped ? nvfp4_grouped_gemm(a_dense.view(), b.view(), offsets_t.view(), d.view())
                     : nvfp4_gemm(a_dense.view(), b.view(), d.view());
  }
  ASSERT_TRUE(status.ok()) << status.to_string();
  const double tolerance =
      c.d_dtype == DType::kF32 ? dsv4::testing::kF32OpRelTol : dsv4::testing::kBf16OutputRelTol;
  const std::vector<double> got = output_values(d);
  EXPECT_LE(dsv4::testing::max_row_rel_error(got.data(), d_ref.data(), c.t, c.n), tolerance);
}

TEST(Nvfp4GemmTest, DenseMatchesFloat64OnAwkwardShapes) {
  SeededRng rng;
  struct Shape3 {
    int64_t t, n, k;
  };
  for (const Shape3 s : {Shape3{1, 33, 16}, Shape3{7, 130, 48}, Shape3{130, 33, 208},
                         Shape3{1, 1, 208}, Shape3{129, 130, 80}}) {
    for (const bool w4a4 : {true, false}) {
      for (const DType d_dtype : {DType::kF32, DType::kBF16}) {
        for (const ScaleLayout layout : {ScaleLayout::kLinear, ScaleLayout::kSwizzled128x4}) {
          const DType a_dtype = (s.t % 2 == 0) ? DType::kF32 : DType::kBF16;
          run_gemm_case(rng, GemmCase{s.t, s.n, s.k, 1, w4a4, a_dtype, d_dtype, layout},
                        {0, static_cast<int32_t>(s.t)});
        }
      }
    }
  }
}

TEST(Nvfp4GemmTest, GroupedMatchesFloat64WithEmptyAndFullGroups) {
  SeededRng rng;
  const int64_t n = 33, k = 48, g = 5;
  // Random contiguous split with empty groups; everything in one middle group; T = 1.
  std::vector<int32_t> random_split = {0, 0, 11, 11, 30, 37};
  const std::vector<std::vector<int32_t>> splits = {
      random_split, {0, 0, 0, 37, 37, 37}, {0, 0, 1, 1, 1, 1}, {0, 37, 37, 37, 37, 37}};
  for (const std::vector<int32_t>& offsets : splits) {
    const int64_t t = offsets.back();
    for (const bool w4a4 : {true, false}) {
      for (const DType d_dtype : {DType::kF32, DType::kBF16}) {
        const ScaleLayout layout = w4a4 ? ScaleLayout::kSwizzled128x4 : ScaleLayout::kLinear;
        run_gemm_case(rng, GemmCase{t, n, k, g, w4a4, DType::kBF16, d_dtype, layout}, offsets);
      }
    }
  }
}

}  // namespace
}  // namespace dsv4::kernels

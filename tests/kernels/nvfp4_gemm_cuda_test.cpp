// The CUDA NVFP4 ops against the CPU reference (label cuda: needs the H200). stage_activation
// must give identical bytes; the GEMMs (W4A16 and W4A4, dense and grouped, every kernel
// gemm/nvfp4/plan.cpp chooses from) must match cpu::nvfp4_gemm within kF32OpRelTol (1e-5) for f32
// output. Awkward shapes: T = 1, T and N off the tiles, K = 16·odd, empty groups, all rows in
// one group. Every device output is poisoned (all-ones bytes: NaN) before the kernel runs.
//
// Dimension letters: T tokens, N output features, K input features, G experts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/buffer.h"
#include "format/nvfp4.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/cuda_ops.h"
#include "testing/compare.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4::kernels {
namespace {

using dsv4::testing::SeededRng;
using format::ScaleLayout;

// Normal values whose magnitude changes per 16-block (so block scales differ), never zero.
std::vector<float> random_values(SeededRng& rng, int64_t count, double sigma) {
  std::normal_distribution<double> normal(0.0, sigma);
  std::vector<float> x(count);
  double block_sigma = sigma;
  for (int64_t i = 0; i < count; ++i) {
    if (i % 16 == 0) block_sigma = std::exp2(rng.uniform(-4.0, 2.0));
    const float v = static_cast<float>(normal(rng.engine()) * block_sigma);
    x[i] = v != 0.0f ? v : 1.0f;
  }
  return x;
}

Tensor host_tensor(DType dtype, Shape shape, const void* bytes) {
  Tensor t = Tensor::host(dtype, shape);
  std::memcpy(t.view().data, bytes, t.view().bytes());
  return t;
}

Tensor to_device(const TensorView& host) {
  Result<Tensor> t = Tensor::empty(host.dtype, host.shape, Device::kCuda);
  DSV4_CHECK(t.ok(), "device allocation failed");
  DSV4_CHECK(copy_tensor(t->view(), host).ok(), "copy to device failed");
  return std::move(t).value();
}

Tensor to_host(const TensorView& device) {
  Tensor t = Tensor::host(device.dtype, device.shape);
  DSV4_CHECK(copy_tensor(t.view(), device).ok(), "copy to host failed");
  return t;
}

// A device tensor whose every byte is 0xff: NaN in f32 and bf16, an impossible UE4M3 scale.
Tensor poisoned_device(DType dtype, Shape shape) {
  Tensor host = Tensor::host(dtype, shape);
  std::memset(host.view().data, 0xff, host.view().bytes());
  return to_device(host.view());
}

bool same_bytes(const TensorView& a, const TensorView& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.data, b.data, a.bytes()) == 0;
}

Tensor bf16_of(const std::vector<float>& x, Shape shape) {
  Tensor t = Tensor::host(DType::kBF16, shape);
  for (size_t i = 0; i < x.size(); ++i) t.data_as<uint16_t>()[i] = float_to_bf16(x[i]);
  return t;
}

// Storage for one staged activation on either device.
struct Staged {
  Tensor packed, block_scale, global_scale;
  StagedActivation view;
};

Staged staged_storage(int64_t t, int64_t k, ScaleLayout layout, Device device) {
  const Shape scale_shape{format::padded_scale_rows(layout, t),
                          format::padded_scale_cols(layout, k / 16)};
  Staged s;
  if (device == Device::kCpu) {
    s.packed = Tensor::host(DType::kU8, {t, k / 2});
    s.block_scale = Tensor::host(DType::kU8, scale_shape);
    s.global_scale = Tensor::host(DType::kF32, {1});
  } else {
    s.packed = poisoned_device(DType::kU8, {t, k / 2});
    s.block_scale = poisoned_device(DType::kU8, scale_shape);
    s.global_scale = poisoned_device(DType::kF32, {1});
  }
  s.view = StagedActivation{s.packed.view(), s.block_scale.view(), s.global_scale.view(), layout};
  return s;
}

TEST(Nvfp4StageCudaTest, BytesMatchTheCpu) {
  SeededRng rng;
  struct Case {
    int64_t t, k;
  };
  for (const Case c : {Case{1, 16}, Case{7, 48}, Case{130, 208}, Case{33, 4112}}) {
    for (const bool dynamic : {true, false}) {
      for (const DType dtype : {DType::kF32, DType::kBF16}) {
        for (const ScaleLayout layout : {ScaleLayout::kLinear, ScaleLayout::kSwizzled128x4}) {
          SCOPED_TRACE("T=" + std::to_string(c.t) + " K=" + std::to_string(c.k) +
                       (dynamic ? " dynamic " : " static ") + std::string(dtype_name(dtype)) +
                       (layout == ScaleLayout::kLinear ? " linear" : " swizzled"));
          const std::vector<float> x = random_values(rng, c.t * c.k, 1.0);
          const Tensor x_host = dtype == DType::kF32 ? host_tensor(dtype, {c.t, c.k}, x.data())
                                                     : bf16_of(x, {c.t, c.k});
          // Static: calibrated below the live amax, so some blocks saturate.
          const float calibrated = format::amax_abs(x.data(), c.t * c.k) / 4000.0f;
          const Tensor scale_host = host_tensor(DType::kF32, {1}, &calibrated);
          const Tensor x_dev = to_device(x_host.view()), scale_dev = to_device(scale_host.view());

          Staged cpu_out = staged_storage(c.t, c.k, layout, Device::kCpu);
          cpu::stage_activation(x_host.view(), dynamic ? TensorView{} : scale_host.view(),
                                cpu_out.view);
          Staged gpu_out = staged_storage(c.t, c.k, layout, Device::kCuda);
          ASSERT_TRUE(cuda::stage_activation(
                          x_dev.view(), dynamic ? TensorView{} : scale_dev.view(), gpu_out.view)
                          .ok());
          EXPECT_TRUE(same_bytes(to_host(gpu_out.packed.view()).view(), cpu_out.packed.view()));
          EXPECT_TRUE(
              same_bytes(to_host(gpu_out.block_scale.view()).view(), cpu_out.block_scale.view()));
          EXPECT_TRUE(
              same_bytes(to_host(gpu_out.global_scale.view()).view(), cpu_out.global_scale.view()));
        }
      }
    }
  }
}

// One GEMM problem: rows of A grouped by `offsets` ({0, T} and G = 1 for the dense op).
struct GemmCase {
  int64_t t, n, k, g;
  bool grouped;
};

std::string describe(const GemmCase& c, bool w4a4, DType d_dtype) {
  return "T=" + std::to_string(c.t) + " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) +
         " G=" + std::to_string(c.g) + (c.grouped ? " grouped" : " dense") +
         (w4a4 ? " W4A4" : " W4A16") + " d=" + std::string(dtype_name(d_dtype));
}

// The weights [G, N, K]: per-matrix magnitudes from 2^-10 to 2, each with its own global scale.
format::Nvfp4Tensor random_weights(SeededRng& rng, int64_t g, int64_t n, int64_t k) {
  std::vector<float> w;
  std::vector<format::GlobalScale> scales;
  for (int64_t e = 0; e < g; ++e) {
    std::vector<float> m = random_values(rng, n * k, 1.0);
    const float magnitude = static_cast<float>(std::exp2(rng.uniform(-10.0, 1.0)));
    for (float& v : m) v *= magnitude;
    scales.push_back(format::GlobalScale::from_amax(format::amax_abs(m.data(), n * k)));
    w.insert(w.end(), m.begin(), m.end());
  }
  Result<format::Nvfp4Tensor> t = format::quantize_ref(w.data(), g, n, k, scales);
  DSV4_CHECK(t.ok(), "quantize_ref: %s", t.status().message().c_str());
  return std::move(t).value();
}

struct DeviceWeights {
  Tensor packed, block_scale, global_scale;
  format::Nvfp4View view() const {
    return format::Nvfp4View{packed.view(), block_scale.view(), global_scale.view(),
                             ScaleLayout::kLinear};
  }
};

// The CPU reference of one case into want (f32 [T, N], or [T, N/2] after the SwiGLU with clamp
// *swiglu_limit: the f32 GEMM, then cpu::swiglu). It stays unrounded for a bf16 output: two
// roundings of values 1e-6 apart can land one bf16 ulp (2^-7 relative) apart, and a SwiGLU row
// of ~100 heavy-tailed values can be carried by one element, so rounding both sides would let
// one flip exceed kBf16OutputRelTol; against the unrounded value each element is within 2^-8.
void cpu_reference(const GemmCase& c, bool w4a4, const Tensor& a_host, const Staged& staged,
                   const format::Nvfp4Tensor& b, const Tensor& offsets_host,
                   std::optional<float> swiglu_limit, const Tensor& want) {
  const bool direct = !swiglu_limit.has_value();
  Tensor gemm = direct ? Tensor() : Tensor::host(DType::kF32, {c.t, c.n});
  const TensorView d = direct ? want.view() : gemm.view();
  if (c.grouped) {
    w4a4 ? cpu::nvfp4_grouped_gemm(staged.view, b.view(), offsets_host.view(), d)
         : cpu::nvfp4_grouped_gemm(a_host.view(), b.view(), offsets_host.view(), d);
  } else {
    w4a4 ? cpu::nvfp4_gemm(staged.view, b.view(), d) : cpu::nvfp4_gemm(a_host.view(), b.view(), d);
  }
  if (direct) return;
  cpu::swiglu(gemm.view(), *swiglu_limit, want.view());
}

// Runs one case both ways for W4A16 and W4A4 and f32 / bf16 output; with swiglu_limit, the
// SwiGLU ops (nvfp4_gemm_swiglu: N = 2F, D [T, F]).
void check_gemm(SeededRng& rng, const GemmCase& c, const std::vector<int32_t>& offsets,
                std::optional<float> swiglu_limit = std::nullopt) {
  const format::Nvfp4Tensor b = random_weights(rng, c.g, c.n, c.k);
  const DeviceWeights b_dev{to_device(b.packed.view()), to_device(b.block_scale.view()),
                            to_device(b.global_scale.view())};
  const Tensor a_host = bf16_of(random_values(rng, c.t * c.k, 1.0), {c.t, c.k});
  const Tensor a_dev = to_device(a_host.view());
  Staged staged = staged_storage(c.t, c.k, ScaleLayout::kLinear, Device::kCpu);
  cpu::stage_activation(a_host.view(), TensorView{}, staged.view);
  const Tensor sp = to_device(staged.packed.view()), ss = to_device(staged.block_scale.view()),
               sg = to_device(staged.global_scale.view());
  const StagedActivation staged_dev{sp.view(), ss.view(), sg.view(), ScaleLayout::kLinear};
  const Tensor offsets_host = host_tensor(DType::kI32, {c.g + 1}, offsets.data());
  const Tensor offsets_dev = to_device(offsets_host.view());
  const int64_t n_out = swiglu_limit ? c.n / 2 : c.n;

  for (const bool w4a4 : {false, true}) {
    for (const DType d_dtype : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(describe(c, w4a4, d_dtype) + (swiglu_limit ? " swiglu" : ""));
      Tensor want = Tensor::host(DType::kF32, {c.t, n_out});
      cpu_reference(c, w4a4, a_host, staged, b, offsets_host, swiglu_limit, want);
      Tensor got_dev = poisoned_device(d_dtype, {c.t, n_out});
      const Tensor gate_up = poisoned_device(DType::kF32, {c.t, c.n});
      const float limit = swiglu_limit.value_or(0.0f);
      Status status;
      if (c.grouped && swiglu_limit) {
        status =
            w4a4 ? cuda::nvfp4_grouped_gemm_swiglu(staged_dev, b_dev.view(), offsets_dev.view(),
                                                   limit, gate_up.view(), got_dev.view())
                 : cuda::nvfp4_grouped_gemm_swiglu(a_dev.view(), b_dev.view(), offsets_dev.view(),
                                                   limit, gate_up.view(), got_dev.view());
      } else if (swiglu_limit) {
        status = w4a4 ? cuda::nvfp4_gemm_swiglu(staged_dev, b_dev.view(), limit, gate_up.view(),
                                                got_dev.view())
                      : cuda::nvfp4_gemm_swiglu(a_dev.view(), b_dev.view(), limit, gate_up.view(),
                                                got_dev.view());
      } else if (c.grouped) {
        status = w4a4 ? cuda::nvfp4_grouped_gemm(staged_dev, b_dev.view(), offsets_dev.view(),
                                                 got_dev.view())
                      : cuda::nvfp4_grouped_gemm(a_dev.view(), b_dev.view(), offsets_dev.view(),
                                                 got_dev.view());
      } else {
        status = w4a4 ? cuda::nvfp4_gemm(staged_dev, b_dev.view(), got_dev.view())
                      : cuda::nvfp4_gemm(a_dev.view(), b_dev.view(), got_dev.view());
      }
      ASSERT_TRUE(status.ok()) << status.to_string();
      const Tensor got = to_host(got_dev.view());
      std::vector<double> got_values(got.numel()), want_values(want.numel());
      for (int64_t i = 0; i < got.numel(); ++i) {
        const bool f32 = d_dtype == DType::kF32;
        got_values[i] = f32 ? got.data_as<float>()[i] : bf16_to_float(got.data_as<uint16_t>()[i]);
        want_values[i] = want.data_as<float>()[i];
      }
      const double error =
          dsv4::testing::max_row_rel_error(got_values.data(), want_values.data(), c.t, n_out);
      const double f32_tol =
          swiglu_limit ? dsv4::testing::kSwigluF32RelTol : dsv4::testing::kF32OpRelTol;
      EXPECT_LE(error, d_dtype == DType::kF32 ? f32_tol : dsv4::testing::kBf16OutputRelTol);
    }
  }
}

// Offsets with the rows spread at random over the groups, some left empty.
std::vector<int32_t> random_offsets(SeededRng& rng, int64_t t, int64_t g) {
  std::vector<int32_t> cuts = {0, static_cast<int32_t>(t)};
  for (int64_t i = 1; i < g; ++i) cuts.push_back(static_cast<int32_t>(rng.uniform_int(0, t)));
  std::sort(cuts.begin(), cuts.end());
  cuts[1 + rng.uniform_int(0, g - 2)] = cuts[1 + rng.uniform_int(0, g - 2)];  // ≥ 1 empty group
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

// Every row in group `full`, the others empty.
std::vector<int32_t> one_group_offsets(int64_t t, int64_t g, int64_t full) {
  std::vector<int32_t> offsets(g + 1);
  for (int64_t i = 0; i <= g; ++i) offsets[i] = i <= full ? 0 : static_cast<int32_t>(t);
  return offsets;
}

class Nvfp4GemmCudaTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(Nvfp4GemmCudaTest, MatchesTheCpu) {
  SeededRng rng;
  const GemmCase c = GetParam();
  if (!c.grouped) {
    check_gemm(rng, c, {0, static_cast<int32_t>(c.t)});
    return;
  }
  check_gemm(rng, c, random_offsets(rng, c.t, c.g));
  check_gemm(rng, c, one_group_offsets(c.t, c.g, rng.uniform_int(0, c.g - 1)));
}

// Stream kernel: one matrix, T ≤ 16, K a multiple of 128 (V4's K as constants: 2048, 3072,
// 7168; others generic, with 1 and 3 K steps leaving warps idle; N not a multiple of 16;
// 9 and 16 tokens in two chunks; at one chunk 8 warps a CTA where K's steps split evenly in
// runs of ≤ 4, 2 CTAs an SM up to 2 · 132 m-tiles (N 1000, 520) and 4 above (N 4232 with K
// 3072 a constant, N 7168 with K 1024 generic), else 4 warps (K 7168)). Small-M kernel: T ≤ 64 for one matrix, ≤ 16 rows per group
// on average grouped (7 rows in 5 groups, 40 in 8), or K not a multiple of 128; wgmma kernel
// above (K = 48 and 112 give one and two K steps, the pipeline's edge cases), grouped with
// the narrowest token tile that holds a group's mean rows plus their square root: 32 tokens
// (100 rows in 4: 25;
// with every row in one group, that group takes four such tiles), 64 (130 in 4: 33), 128 (300
// in 4: 75) and 256 above 128.
INSTANTIATE_TEST_SUITE_P(
    Shapes, Nvfp4GemmCudaTest,
    ::testing::Values(GemmCase{1, 1000, 2048, 1, false}, GemmCase{3, 136, 7168, 1, false},
                      GemmCase{8, 520, 3072, 1, false}, GemmCase{9, 200, 384, 1, false},
                      GemmCase{12, 24, 128, 1, false}, GemmCase{1, 72, 48, 1, false},
                      GemmCase{5, 300, 208, 1, false}, GemmCase{16, 4096, 1024, 1, false},
                      GemmCase{2, 4232, 3072, 1, false}, GemmCase{4, 7168, 1024, 1, false},
                      GemmCase{33, 200, 2064, 1, false}, GemmCase{64, 520, 512, 1, false},
                      GemmCase{65, 300, 336, 1, false}, GemmCase{200, 264, 1040, 1, false},
                      GemmCase{517, 1000, 528, 1, false}, GemmCase{130, 72, 48, 1, false},
                      GemmCase{300, 136, 112, 1, false},
                      GemmCase{2098, 4168, 192, 1, false},  // > 1 tile per persistent CTA
                      GemmCase{7, 136, 80, 5, true}, GemmCase{40, 264, 208, 8, true},
                      GemmCase{100, 264, 1040, 4, true}, GemmCase{130, 520, 1040, 4, true},
                      GemmCase{300, 264, 208, 4, true}, GemmCase{400, 264, 208, 3, true},
                      GemmCase{700, 520, 1040, 5, true}, GemmCase{3000, 520, 208, 4, true}));

// The SwiGLU ops (an MoE's L1, N = 2F): in the warp-specialised kernel's epilogue (T = 300
// dense; 25, 75 and 750 rows per group, 32-, 128- and 256-token tiles; F = 100 leaves the
// second 64-column tile part empty) and through gate_up and the row pass where another kernel
// runs (T = 40 dense: small-M; 9 rows: stream; 40 rows in 8 groups: small-M grouped). The clamp
// at 1.5 bites on the larger matrices (magnitudes up to 2, K up to 1024).
class Nvfp4GemmSwigluCudaTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(Nvfp4GemmSwigluCudaTest, MatchesTheCpu) {
  SeededRng rng;
  const GemmCase c = GetParam();
  for (const float limit : {0.0f, 1.5f}) {
    if (!c.grouped) {
      check_gemm(rng, c, {0, static_cast<int32_t>(c.t)}, limit);
      continue;
    }
    check_gemm(rng, c, random_offsets(rng, c.t, c.g), limit);
    check_gemm(rng, c, one_group_offsets(c.t, c.g, rng.uniform_int(0, c.g - 1)), limit);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Nvfp4GemmSwigluCudaTest,
    ::testing::Values(GemmCase{300, 256, 1024, 1, false}, GemmCase{300, 200, 208, 1, false},
                      GemmCase{40, 256, 512, 1, false}, GemmCase{9, 256, 384, 1, false},
                      GemmCase{300, 264, 208, 4, true}, GemmCase{3000, 200, 208, 4, true},
                      GemmCase{40, 264, 208, 8, true}, GemmCase{100, 264, 208, 4, true}));

}  // namespace
}  // namespace dsv4::kernels

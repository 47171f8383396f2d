// The CUDA FP8 linear (kernels/ops.h, "FP8"; label cuda: needs the GPU). The quantizer must give
// the CPU's bytes; the GEMM, on every kernel gemm/fp8/plan.cpp picks (the stream kernel up to 64
// tokens, the warp-specialised wgmma kernel above), must match a float64 evaluation of the same
// quantized operands within kFp8LinearCudaSumRelTol. Awkward shapes: one token, M, N and K off
// the tiles and blocks, K under one block, a strided weight and output, more tiles than SMs (the
// persistent walk), more K blocks than ring stages; narrow weights whose tiles split K over a
// cluster (1-8 CTAs), called twice for the same bits. The block-diagonal form (wo_a) per group
// against the same float64 evaluation, on both kernels. Device outputs start poisoned (NaN).
//
// Dimension letters: T tokens, N output features, K input features, Kb = ceil(K/128).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "base/buffer.h"
#include "fp8_linear_case.h"
#include "kernels/cuda/gemm/fp8/plan.h"
#include "kernels/ops.h"
#include "testing/device.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4::kernels {
namespace {

using testing::fp8_group_count;
using testing::poisoned_device;
using testing::same_bytes;
using testing::SeededRng;
using testing::to_device;
using testing::to_host;

using testing::Fp8Storage;

Fp8Storage device_storage(int64_t t, int64_t k) {
  return {poisoned_device(DType::kF8E4M3, {t, k}),
          poisoned_device(DType::kF32, {t, fp8_group_count(k)})};
}

TEST(QuantizeActivationFp8Cuda, BytesMatchTheCpu) {
  SeededRng rng;
  struct Case {
    int64_t t, k, row_stride;
  };
  for (const Case c :
       {Case{1, 128, 128}, Case{3, 130, 131}, Case{33, 4112, 4112}, Case{300, 7168, 7170}}) {
    SCOPED_TRACE("T=" + std::to_string(c.t) + " K=" + std::to_string(c.k));
    const Tensor dense = testing::fp8_random_activation(rng, c.t, c.row_stride);
    TensorView x_host = dense.view();
    x_host.shape = {c.t, c.k};  // rows row_stride apart
    const Tensor x_dev_storage = to_device(dense.view());
    TensorView x_dev = x_dev_storage.view();
    x_dev.shape = {c.t, c.k};
    Fp8Storage cpu_out = testing::fp8_host_storage(c.t, c.k), gpu_out = device_storage(c.t, c.k);
    ASSERT_TRUE(quantize_activation_fp8(x_host, cpu_out.view()).ok());
    ASSERT_TRUE(quantize_activation_fp8(x_dev, gpu_out.view()).ok());
    EXPECT_TRUE(same_bytes(to_host(gpu_out.values.view()).view(), cpu_out.values.view()));
    EXPECT_TRUE(same_bytes(to_host(gpu_out.scales.view()).view(), cpu_out.scales.view()));
  }
}

struct GemmCase {
  int64_t t, n, k, row_stride;
};

class LinearFp8Cuda : public ::testing::TestWithParam<GemmCase> {};

TEST_P(LinearFp8Cuda, MatchesFloat64) {
  const GemmCase c = GetParam();
  // The path depends on the shape alone; 132 SMs (H100 SXM, H200) only sets the grid it prints.
  const cuda::sm90::Fp8GemmPlan plan = cuda::sm90::plan_fp8_gemm(c.t, c.n, c.k, 132);
  SCOPED_TRACE(cuda::sm90::describe(plan));
  SeededRng rng;
  const Tensor x = testing::fp8_random_activation(rng, c.t, c.k);
  const testing::Fp8RandomWeight w = testing::fp8_random_weight(rng, c.n, c.k, c.row_stride);
  const Tensor w_values = to_device(w.values.view()), w_scales = to_device(w.scales.view());

  // The convenience op on the device: quantize, then the GEMM into a strided y.
  const Tensor x_dev = to_device(x.view());
  Fp8Storage scratch = device_storage(c.t, c.k);
  const int64_t y_stride = c.n + 4;
  const Tensor y_storage = poisoned_device(DType::kF32, {c.t, y_stride});
  TensorView y = y_storage.view();
  y.shape = {c.t, c.n};
  ASSERT_TRUE(linear_fp8(x_dev.view(), w.view(w_values, w_scales), scratch.view(), y).ok());

  const Tensor a_values = to_host(scratch.values.view()), a_scales = to_host(scratch.scales.view());
  const testing::Fp8Reference ref =
      testing::fp8_reference(a_values.data_as<uint8_t>(), a_scales.data_as<float>(), c.t, w);
  const Tensor y_host = to_host(y_storage.view());
  const double error = testing::fp8_sum_rel_error(y_host.data_as<float>(), y_stride, ref, c.t, c.n);
  std::printf("linear_fp8 T=%lld N=%lld K=%lld (%s): max |y - y64| / sum|a w| = %.3g\n",
              (long long)c.t, (long long)c.n, (long long)c.k, cuda::sm90::describe(plan).c_str(),
              error);
  EXPECT_LE(error, testing::kFp8LinearCudaSumRelTol);
  // The padding columns of y's rows stay untouched (poisoned).
  for (int64_t t = 0; t < c.t; ++t) {
    EXPECT_TRUE(std::isnan(y_host.data_as<float>()[t * y_stride + c.n])) << "row " << t;
  }
  // The same call again gives the same bits (a split tile's fixed summation order).
  ASSERT_TRUE(linear_fp8(scratch.view(), w.view(w_values, w_scales), y).ok());
  EXPECT_TRUE(same_bytes(to_host(y_storage.view()).view(), y_host.view()));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, LinearFp8Cuda,
    ::testing::Values(GemmCase{1, 512, 4096, 4096},      // stream, 4 CTAs a tile (wkv at decode)
                      GemmCase{2, 1024, 4096, 4096},     // stream, 2 CTAs a tile (wq_a)
                      GemmCase{8, 512, 4096, 4096},      // stream, 4 CTAs a tile (wkv, B = 8)
                      GemmCase{16, 1024, 4096, 4096},    // stream, 2 CTAs, two chunks (wq_a)
                      GemmCase{1, 128, 8192, 8192},      // stream, 8 CTAs a tile
                      GemmCase{3, 160, 1040, 1056},      // stream, 2 CTAs, N and K off the tiles
                      GemmCase{33, 256, 2048, 2048},     // stream, 4 CTAs, 8 chunks
                      GemmCase{16, 32768, 1024, 1024},   // stream, one CTA a tile (wq_b)
                      GemmCase{5, 200, 304, 320},        // stream; N, K off the tiles, strided w
                      GemmCase{16, 4096, 2048, 2048},    // stream, two chunks
                      GemmCase{33, 1000, 1024, 1024},    // stream, 5 chunks of 8 in a pass of 8
                      GemmCase{64, 256, 16, 16},         // stream, K under one block
                      GemmCase{65, 256, 1024, 1024},     // ws: one token tile, half past M
                      GemmCase{300, 200, 304, 320},      // ws: N, K off the tiles, strided w
                      GemmCase{1024, 2304, 256, 256},    // ws: 144 tiles, more than SMs
                      GemmCase{256, 384, 2048, 2064},    // ws: 16 K blocks round a 6-slot ring
                      GemmCase{1200, 3072, 144, 160}));  // ws 256-token tiles (≥ 90 % of SMs)

// Which stream plans the V4-Flash decode shapes get (the path is the shape's alone; 132 SMs).
TEST(Fp8StreamPlan, SplitsNarrowWeightsOverClusters) {
  struct Case {
    int64_t m, n, k;
    int split;
  };
  for (const Case c : {Case{1, 1024, 4096, 2}, Case{1, 512, 4096, 4}, Case{16, 512, 4096, 4},
                       Case{1, 128, 8192, 8}, Case{1, 32768, 1024, 1}, Case{1, 8192, 4096, 1},
                       Case{1, 4096, 8192, 1}, Case{1, 512, 512, 1}}) {
    const cuda::sm90::Fp8GemmPlan plan = cuda::sm90::plan_fp8_gemm(c.m, c.n, c.k, 132);
    EXPECT_EQ(plan.path, cuda::sm90::Fp8GemmPath::kStream);
    EXPECT_EQ(plan.stream_split, c.split) << c.m << " x " << c.n << " x " << c.k;
    // A split CTA keeps its kFp8StreamMinSplitBlocks K blocks, and the grid fits the SMs.
    if (plan.stream_split > 1) {
      EXPECT_GE((c.k + 127) / 128, plan.stream_split * cuda::sm90::kFp8StreamMinSplitBlocks);
      EXPECT_LE((c.n + 15) / 16 * plan.stream_split, 132);
    }
  }
}

// block_diagonal_linear_fp8 (wo_a): G groups in one launch, each group's columns of y within
// the float64 bound of that group's plain GEMM; V4-Flash's wo_a (G 8, R 1024, K 4096) at decode
// rows (the stream kernel) and prefill rows (the wgmma kernel, both token tiles), and small
// groups off the SM count. The activation is quantized on the device, as the model does.
struct GroupedCase {
  int64_t t, n_groups, r, k;
};

class BlockDiagonalLinearFp8Cuda : public ::testing::TestWithParam<GroupedCase> {};

TEST_P(BlockDiagonalLinearFp8Cuda, EachGroupMatchesFloat64) {
  const GroupedCase c = GetParam();
  const int64_t n = c.n_groups * c.r, k_all = c.n_groups * c.k;
  const cuda::sm90::Fp8GemmPlan plan = cuda::sm90::plan_fp8_gemm(c.t, n, c.k, 132);
  SCOPED_TRACE(cuda::sm90::describe(plan));
  SeededRng rng;
  const Tensor x = testing::fp8_random_activation(rng, c.t, k_all);
  const testing::Fp8RandomWeight w = testing::fp8_random_weight(rng, n, c.k, c.k);
  const Tensor w_values = to_device(w.values.view()), w_scales = to_device(w.scales.view());
  Fp8Storage a = device_storage(c.t, k_all);
  ASSERT_TRUE(quantize_activation_fp8(to_device(x.view()).view(), a.view()).ok());
  const int64_t y_stride = n + 4;
  const Tensor y_storage = poisoned_device(DType::kF32, {c.t, y_stride});
  TensorView y = y_storage.view();
  y.shape = {c.t, n};
  ASSERT_TRUE(block_diagonal_linear_fp8(a.view(), w.view(w_values, w_scales), c.n_groups, y).ok());

  const Tensor a_values = to_host(a.values.view()), a_scales = to_host(a.scales.view());
  const Tensor y_host = to_host(y_storage.view());
  // Rows checked against float64: all of a decode step's, the first and last 8 of a prefill's.
  std::vector<int64_t> rows;
  for (int64_t t = 0; t < c.t; ++t) {
    if (c.t <= 16 || t < 8 || t >= c.t - 8) rows.push_back(t);
  }
  double worst = 0.0;
  for (int64_t g = 0; g < c.n_groups; ++g) {
    const testing::Fp8Group group = testing::fp8_group(
        a_values.data_as<uint8_t>(), a_scales.data_as<float>(), c.t, c.n_groups, w, g);
    for (const int64_t t : rows) {
      const testing::Fp8Reference ref = testing::fp8_reference(
          group.a.values.data_as<uint8_t>() + t * c.k,
          group.a.scales.data_as<float>() + t * fp8_group_count(c.k), 1, group.w);
      worst = std::max(worst,
                       testing::fp8_sum_rel_error(y_host.data_as<float>() + t * y_stride + g * c.r,
                                                  y_stride, ref, 1, c.r));
    }
  }
  std::printf("block_diagonal_linear_fp8 T=%lld G=%lld R=%lld K=%lld (%s): max rel = %.3g\n",
              (long long)c.t, (long long)c.n_groups, (long long)c.r, (long long)c.k,
              cuda::sm90::describe(plan).c_str(), worst);
  EXPECT_LE(worst, testing::kFp8LinearCudaSumRelTol);
  for (int64_t t = 0; t < c.t; ++t) {
    EXPECT_TRUE(std::isnan(y_host.data_as<float>()[t * y_stride + n])) << "row " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, BlockDiagonalLinearFp8Cuda,
    ::testing::Values(GroupedCase{1, 8, 1024, 4096},    // wo_a at B = 1: stream, 512 tiles
                      GroupedCase{2, 8, 1024, 4096},    // stream
                      GroupedCase{8, 8, 1024, 4096},    // stream
                      GroupedCase{16, 8, 1024, 4096},   // stream, two chunks
                      GroupedCase{40, 8, 1024, 4096},   // ws 128-token tiles (64 tiles ≥ 16)
                      GroupedCase{300, 8, 1024, 4096},  // ws 256-token tiles, persistent
                      GroupedCase{3, 3, 128, 1024},     // stream, 2 CTAs a tile, 3 groups
                      GroupedCase{100, 2, 256, 256}));  // ws, 2 groups, one token tile

TEST(LinearFp8Cuda, RefusesKOffSixteen) {
  const Fp8Storage a = device_storage(2, 24);
  const Tensor w_values = poisoned_device(DType::kF8E4M3, {128, 32});
  const Tensor w_scales = poisoned_device(DType::kF32, {1, 1});
  const Tensor y = poisoned_device(DType::kF32, {2, 128});
  const format::Fp8BlockView w{w_values.data_as<const uint8_t>(),
                               w_scales.data_as<const float>(),
                               128,
                               24,
                               32,
                               Device::kCuda};
  EXPECT_EQ(linear_fp8(a.view(), w, y.view()).code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace dsv4::kernels

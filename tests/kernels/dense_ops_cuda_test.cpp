// The CUDA dense, mHC and MoE-dispatch ops against the CPU reference (label cuda: needs the
// GPU). Every op is called through kernels/ops.h on host and device copies of the same random
// inputs, at awkward sizes (1, odd, off any tile). Ops the CUDA code promises bit-identical
// (add, embedding, gather_rows, copy_blocks, hc_repeat/collapse/expand, moe_group/gather/combine,
// the routed ids) are compared byte for byte; the rest within kCudaF32OpRelTol per row.
//
// Dimension letters: T tokens, K input features, N output features, D model width, M streams,
// E experts, G groups, R grouped rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/float_convert.h"
#include "kernels/contracts.h"
#include "kernels/cuda/gemm/dense/launch.h"
#include "kernels/cuda_op_pair.h"
#include "kernels/hc_pre_norm_case.h"
#include "kernels/ops.h"
#include "kernels/rms_norm_order_case.h"
#include "testing/fp8_weight.h"
#include "testing/tolerance.h"

namespace dsv4::kernels {
namespace {

using testing::device_equals_host;
using testing::device_vs_host_error;
using testing::kCudaF32OpRelTol;
using testing::OpPair;
using testing::SeededRng;

// Columns [begin, end) of a 2-D view: a strided operand, as the model's fused projections use.
TensorView columns(const TensorView& m, int64_t begin, int64_t end) {
  TensorView view = m;
  view.data = m.data_as<float>() + begin;
  view.shape[1] = end - begin;
  return view;
}

TEST(DenseOpsCuda, LinearMatchesCpuOnStridedRows) {
  SeededRng rng;
  // Both CUDA-core kernels (gemm/dense/linear_cuda_cores.cu): the few-rows one with one output
  // a block (narrow N, any T; mHC's 24 mixes of a 16384-wide residual) and four (N ≥ 1024, two
  // token chunks, ragged tails), and the tiled one (T > 16 with ≥ 128 tiles).
  for (const auto& [t, n, k] : {std::tuple{1, 1, 1},
                                {3, 65, 17},
                                {70, 130, 300},
                                {129, 7, 1025},
                                {2, 24, 16384},
                                {9, 1030, 700},
                                {130, 4100, 33}}) {
    SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(n) + "x" + std::to_string(k));
    const OpPair x = OpPair::uniform(rng, {t, k + 5});
    const OpPair w = OpPair::uniform(rng, {n, k});
    const OpPair y = OpPair::poisoned(DType::kF32, {t, n});
    ASSERT_TRUE(linear(columns(x.h(), 3, 3 + k), w.h(), y.h()).ok());
    ASSERT_TRUE(linear(columns(x.d(), 3, 3 + k), w.d(), y.d()).ok());
    EXPECT_LT(device_vs_host_error(y), kCudaF32OpRelTol);
  }
}

// The same with the weight in bf16 (what copy_weights keeps of a bf16 checkpoint on a GPU):
// the bits of the device's own f32-weight result, on both CUDA-core kernels, and the CPU's within
// the usual tolerance. (With aligned rows a bf16 weight runs on the tensor cores at ≥ 32 rows,
// and at 2-16 when K is a multiple of 32: the tests below.)
TEST(DenseOpsCuda, LinearBf16WeightGivesTheBitsOfItsF32Widening) {
  SeededRng rng;
  // Aligned rows (vector loads) on every few-rows configuration (N ≥ 8192, ≥ 1024, ≥ 128, less),
  // K a multiple of 4 but not of 32, or 20 rows, and the tiled kernel; K odd (scalar loads).
  for (const auto& [t, n, k] : {std::tuple{3, 8200, 132},
                                {9, 1030, 300},
                                {20, 130, 256},
                                {5, 40, 516},
                                {1, 24, 4097},
                                {130, 4100, 33}}) {
    SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(n) + "x" + std::to_string(k));
    const OpPair x = OpPair::uniform(rng, {t, k});
    std::vector<uint16_t> bits(static_cast<size_t>(n) * k);
    std::vector<float> widened(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) {
      bits[i] = float_to_bf16(static_cast<float>(rng.uniform(-1.0, 1.0)));
      widened[i] = bf16_to_float(bits[i]);
    }
    const OpPair w_bf16 = OpPair::values(DType::kBF16, {n, k}, bits);
    const OpPair w_f32 = OpPair::values(DType::kF32, {n, k}, widened);
    const OpPair y = OpPair::poisoned(DType::kF32, {t, n});
    const OpPair y_f32 = OpPair::poisoned(DType::kF32, {t, n});
    ASSERT_TRUE(linear(x.h(), w_bf16.h(), y.h()).ok());
    ASSERT_TRUE(linear(x.d(), w_bf16.d(), y.d()).ok());
    ASSERT_TRUE(linear(x.d(), w_f32.d(), y_f32.d()).ok());
    EXPECT_LT(device_vs_host_error(y), kCudaF32OpRelTol);
    EXPECT_TRUE(testing::same_bytes(y.result().view(), y_f32.result().view()));
  }
}

// y = x · wᵀ with a random bf16 weight, block-diagonal in g groups of r outputs over K = k, x's
// columns from `offset` on: the CUDA result within the tolerance of the CPU's, on `kernel` (or,
// with !on_it, on another).
void expect_bf16_linear_matches_cpu(SeededRng& rng, int64_t t, int64_t g, int64_t r, int64_t k,
                                    int64_t offset, cuda::DenseKernel kernel, bool on_it) {
  SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(g) + "x" + std::to_string(r) + "x" +
               std::to_string(k) + "+" + std::to_string(offset));
  const OpPair x = OpPair::uniform(rng, {t, g * k + offset});
  std::vector<uint16_t> bits(static_cast<size_t>(g * r * k));
  for (uint16_t& b : bits) b = float_to_bf16(static_cast<float>(rng.uniform(-1.0, 1.0)));
  const OpPair w = OpPair::values(DType::kBF16, {g * r, k}, bits);
  const OpPair y = OpPair::poisoned(DType::kF32, {t, g * r});
  const TensorView x_d = columns(x.d(), offset, offset + g * k);
  EXPECT_EQ(cuda::plan_for(block_diagonal_operands(x_d, w.d(), g, y.d()), g).kernel == kernel,
            on_it);
  ASSERT_TRUE(block_diagonal_linear(columns(x.h(), offset, offset + g * k), w.h(), g, y.h()).ok());
  ASSERT_TRUE(block_diagonal_linear(x_d, w.d(), g, y.d()).ok());
  EXPECT_LT(device_vs_host_error(y), kCudaF32OpRelTol);
}

// bf16 weights and ≥ 17 rows of x run on the tensor cores (gemm/dense/linear_tensor_cores.cu): x, T
// and N off the 128 tiles, K off the 32-wide step (264 = 8 · 33), x aligned (16-byte loads) and
// a strided column view (scalar loads), and a block-diagonal call (a group a grid slice).
TEST(DenseOpsCuda, LinearOnTensorCoresMatchesCpu) {
  SeededRng rng;
  for (const auto& [t, g, r, k, offset] : {std::tuple{300, 1, 1500, 264, 0},
                                           {33, 1, 4100, 64, 3},
                                           {200, 4, 520, 136, 0},
                                           {130, 2, 1030, 1032, 1}}) {
    expect_bf16_linear_matches_cpu(rng, t, g, r, k, offset, cuda::DenseKernel::kTensorCores, true);
  }
}

// 2-16 rows of x (a batch's decode step) on the tensor cores
// (gemm/dense/linear_few_rows_tensor_cores.cu): N off the 16-row tile, one and two token chunks,
// 8 and 16 warps a CTA, runs of K steps that leave warps none (K = 96: 3 steps for 8 warps) or
// end mid-batch (K = 1056: 33 steps), V4-Flash's wo_a shape (8 groups of 1024 over K = 4096) and
// groups of 176 outputs with x from column 4 on. Off it (the CUDA-core kernel): x misaligned by
// one column, 3 rows on 63 m-tiles, and mHC's 24 outputs.
TEST(DenseOpsCuda, LinearFewRowsOnTensorCoresMatchesCpu) {
  SeededRng rng;
  for (const auto& [t, g, r, k, offset] : {std::tuple{2, 1, 2100, 1024, 0},
                                           {8, 1, 4100, 96, 0},
                                           {16, 1, 520, 1056, 0},
                                           {5, 8, 1024, 4096, 0},
                                           {13, 3, 176, 256, 4}}) {
    expect_bf16_linear_matches_cpu(rng, t, g, r, k, offset, cuda::DenseKernel::kFewRowsTensorCores,
                                   true);
  }
  for (const auto& [t, r, k, offset] :
       {std::tuple{4, 3000, 512, 1}, {3, 1000, 1024, 0}, {8, 24, 16384, 0}}) {
    expect_bf16_linear_matches_cpu(rng, t, 1, r, k, offset, cuda::DenseKernel::kFewRowsTensorCores,
                                   false);
  }
}

// An FP8 weight (e4m3 + power-of-two 128 × 128 block scales, what load_model_on keeps of an FP8
// checkpoint) on every kernel gives the bits of the same call on its bf16 decoding (what the GPU
// held before, copy_weights of the host's decode), which the plan runs on the same kernel: the
// tiled and few-rows CUDA-core kernels (f32 widening), both tensor-core kernels (decoded to the
// bf16 tile), plain and block-diagonal (groups of 48 and 1024 rows: a group may start mid-block),
// x aligned and a strided column view; and the CPU's result on the codes within tolerance.
TEST(DenseOpsCuda, LinearFp8WeightGivesTheBitsOfItsBf16Decoding) {
  SeededRng rng;
  for (const auto& [t, g, r, k, offset, kernel] :
       {std::tuple{1, 1, 8200, 256, 0, cuda::DenseKernel::kFewRows},
        {3, 1, 1030, 300, 0, cuda::DenseKernel::kFewRows},
        {1, 8, 1024, 512, 0, cuda::DenseKernel::kFewRows},
        {130, 1, 4100, 36, 0, cuda::DenseKernel::kTiled},
        {300, 1, 1500, 264, 0, cuda::DenseKernel::kTensorCores},
        {200, 4, 520, 136, 3, cuda::DenseKernel::kTensorCores},
        {8, 1, 4100, 96, 0, cuda::DenseKernel::kFewRowsTensorCores},
        {5, 8, 1024, 4096, 0, cuda::DenseKernel::kFewRowsTensorCores},
        {13, 3, 48, 256, 4, cuda::DenseKernel::kFewRows}}) {
    SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(g) + "x" + std::to_string(r) + "x" +
                 std::to_string(k) + "+" + std::to_string(offset));
    const testing::Fp8Weight fp8 = testing::random_fp8_weight(rng, g * r, k);
    std::vector<uint16_t> bits(fp8.decoded.size());
    for (size_t i = 0; i < bits.size(); ++i) {
      bits[i] = float_to_bf16(fp8.decoded[i]);
      ASSERT_EQ(bf16_to_float(bits[i]), fp8.decoded[i]) << "not exactly a bf16 at " << i;
    }
    const OpPair codes = OpPair::values(DType::kF8E4M3, {g * r, k}, fp8.codes);
    const OpPair scales =
        OpPair::values(DType::kF32, {static_cast<int64_t>(fp8.scales.size())}, fp8.scales);
    format::Fp8BlockView w_d = fp8.view(), w_h = fp8.view();
    w_d.values = codes.d().data_as<const uint8_t>();
    w_d.block_scales = scales.d().data_as<const float>();
    w_d.device = Device::kCuda;
    const OpPair w_bf16 = OpPair::values(DType::kBF16, {g * r, k}, bits);
    const OpPair x = OpPair::uniform(rng, {t, g * k + offset});
    const TensorView x_d = columns(x.d(), offset, offset + g * k);
    const TensorView x_h = columns(x.h(), offset, offset + g * k);
    const OpPair y = OpPair::poisoned(DType::kF32, {t, g * r});
    const OpPair y_bf16 = OpPair::poisoned(DType::kF32, {t, g * r});
    const cuda::DensePlan plan = cuda::plan_for(block_diagonal_operands(x_d, w_d, g, y.d()), g);
    EXPECT_EQ(plan.kernel, kernel) << cuda::describe(plan);
    EXPECT_EQ(plan.kernel,
              cuda::plan_for(block_diagonal_operands(x_d, w_bf16.d(), g, y.d()), g).kernel);
    ASSERT_TRUE(block_diagonal_linear(x_h, w_h, g, y.h()).ok());
    ASSERT_TRUE(block_diagonal_linear(x_d, w_d, g, y.d()).ok());
    ASSERT_TRUE(block_diagonal_linear(x_d, w_bf16.d(), g, y_bf16.d()).ok());
    EXPECT_TRUE(testing::same_bytes(y.result().view(), y_bf16.result().view()));
    EXPECT_LT(device_vs_host_error(y), kCudaF32OpRelTol);
  }
}

// The few-rows kernel's shape below 128 outputs (plan.cpp), whose bits the narrow kernel keeps.
cuda::DensePlan few_rows_narrow_plan() {
  cuda::DensePlan plan;
  plan.kernel = cuda::DenseKernel::kFewRows;
  plan.warps = 16, plan.cols = 1, plan.split = 16, plan.tokens = 8;
  return plan;
}

// y = x · wᵀ, x [T, K] and w [N, K] (TensorViews or Fp8BlockViews) on the narrow kernel
// (gemm/dense/linear_narrow.cu): within the tolerance of the CPU; every row the bits the
// few-rows kernel gives it; the first 64 rows alone (another grid and cluster size) and the
// last row alone (a one-row call, which the few-rows kernel takes as a decode step) the bits
// of the same rows of the whole call.
template <typename W>
void expect_narrow_linear(const TensorView& x_h, const TensorView& x_d, const W& w_h,
                          const W& w_d, int64_t n) {
  const int64_t t = x_d.shape[0];
  const OpPair y = OpPair::poisoned(DType::kF32, {t, n});
  const OpPair y_few = OpPair::poisoned(DType::kF32, {t, n});
  const OpPair y_first = OpPair::poisoned(DType::kF32, {64, n});
  const OpPair y_last = OpPair::poisoned(DType::kF32, {1, n});
  const cuda::DensePlan plan = cuda::plan_for(linear_operands(x_d, w_d, y.d()), 1);
  EXPECT_EQ(plan.kernel, cuda::DenseKernel::kNarrow) << cuda::describe(plan);
  ASSERT_TRUE(linear(x_h, w_h, y.h()).ok());
  ASSERT_TRUE(linear(x_d, w_d, y.d()).ok());
  cuda::launch_dense(linear_operands(x_d, w_d, y_few.d()), 1, few_rows_narrow_plan());
  ASSERT_TRUE(linear(x_d.rows(0, 64), w_d, y_first.d()).ok());
  ASSERT_TRUE(linear(x_d.rows(t - 1, t), w_d, y_last.d()).ok());
  EXPECT_LT(device_vs_host_error(y), kCudaF32OpRelTol);
  const Tensor got = y.result();
  EXPECT_TRUE(testing::same_bytes(got.view(), y_few.result().view()));
  EXPECT_TRUE(testing::same_bytes(got.view().rows(0, 64), y_first.result().view()));
  EXPECT_TRUE(testing::same_bytes(got.view().rows(t - 1, t), y_last.result().view()));
}

// Many rows of few outputs (expect_narrow_linear): mHC's mixes (24 outputs over a 16384-wide
// residual, an f32 weight: 3 outputs a warp, 16-token tiles) at 2048 rows and off the tile
// (300), the indexer's head weights (64 over 4096, bf16: 8 outputs a warp, 8-token tiles),
// 7 outputs over K = 1000 at 64 rows (the fewest the plan gives it; slices of 15-16 runs of 4,
// a step ending mid-slice), 16 outputs over K = 40 (slices of 0 or 1 run, some empty), and
// column views of a wider x (a row stride past K).
TEST(DenseOpsCuda, NarrowLinearGivesTheFewRowsBits) {
  SeededRng rng;
  for (const auto& [t, n, k, offset, bf16] : {std::tuple{2048, 24, 16384, 0, false},
                                              {2048, 64, 4096, 0, true},
                                              {300, 24, 16384, 0, false},
                                              {64, 7, 1000, 0, false},
                                              {70, 16, 40, 0, false},
                                              {130, 40, 516, 4, false},
                                              {100, 3, 2048, 8, true}}) {
    SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(n) + "x" + std::to_string(k) + "+" +
                 std::to_string(offset) + (bf16 ? " bf16" : " f32"));
    const OpPair x = OpPair::uniform(rng, {t, k + 2 * offset});
    std::vector<uint16_t> bits(static_cast<size_t>(n) * k);
    for (uint16_t& b : bits) b = float_to_bf16(static_cast<float>(rng.uniform(-1.0, 1.0)));
    const OpPair w =
        bf16 ? OpPair::values(DType::kBF16, {n, k}, bits) : OpPair::uniform(rng, {n, k});
    expect_narrow_linear(columns(x.h(), offset, offset + k), columns(x.d(), offset, offset + k),
                         w.h(), w.d(), n);
  }
}

// The same with FP8 weights (e4m3 and 128 × 128 block scales), 24 and 64 outputs.
TEST(DenseOpsCuda, NarrowLinearGivesTheFewRowsBitsOnFp8Weights) {
  SeededRng rng;
  for (const auto& [t, n, k] : {std::tuple{200, 24, 4096}, {96, 64, 640}}) {
    SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(n) + "x" + std::to_string(k));
    const testing::Fp8Weight fp8 = testing::random_fp8_weight(rng, n, k);
    const OpPair codes = OpPair::values(DType::kF8E4M3, {n, k}, fp8.codes);
    const OpPair scales =
        OpPair::values(DType::kF32, {static_cast<int64_t>(fp8.scales.size())}, fp8.scales);
    format::Fp8BlockView w_d = fp8.view();
    w_d.values = codes.d().data_as<const uint8_t>();
    w_d.block_scales = scales.d().data_as<const float>();
    w_d.device = Device::kCuda;
    const OpPair x = OpPair::uniform(rng, {t, k});
    expect_narrow_linear(x.h(), x.d(), fp8.view(), w_d, n);
  }
}

// The plan alone (no GPU work): the shapes above take the narrow kernel, with the cluster that
// fills 132 SMs twice (256 rows of 24 outputs: 16 tiles × 8 blocks); decode-sized calls keep
// the few-rows kernel; wider N, more groups, unaligned rows and bf16 weights with rows for the
// tensor cores stay where they were.
TEST(DenseOpsCuda, PlanPutsManyRowsOfFewOutputsOnTheNarrowKernel) {
  // x [T, G·K + x_offset] from column x_offset on, seen as its first group's K columns.
  const auto operands = [](int64_t t, int64_t n, int64_t k, DType dtype, int64_t x_offset,
                           int64_t groups) {
    LinearOperands o;
    o.x = {reinterpret_cast<float*>(uintptr_t{1} << 32) + x_offset, t, k, groups * k + x_offset};
    o.w.data = reinterpret_cast<const void*>(uintptr_t{1} << 33);
    o.w.dtype = dtype;
    o.w.n_rows = n, o.w.n_cols = k, o.w.row_stride = k;
    o.y = {reinterpret_cast<float*>(uintptr_t{1} << 34), t, n, n};
    return o;
  };
  struct Case {
    int64_t t, n, k;
    DType dtype;
    int64_t x_offset, groups;
    cuda::DenseKernel kernel;
    int cols, tokens, split;
  };
  using K = cuda::DenseKernel;
  for (const Case& c : {Case{2048, 24, 16384, DType::kF32, 0, 1, K::kNarrow, 3, 16, 4},
                        Case{16384, 24, 16384, DType::kF32, 0, 1, K::kNarrow, 3, 16, 2},
                        Case{256, 24, 16384, DType::kF32, 0, 1, K::kNarrow, 3, 16, 8},
                        Case{2048, 64, 4096, DType::kBF16, 0, 1, K::kNarrow, 8, 8, 2},
                        Case{64, 7, 1000, DType::kF32, 0, 1, K::kNarrow, 1, 16, 8},
                        Case{300, 24, 16384, DType::kF8E4M3, 4, 1, K::kNarrow, 3, 16, 8},
                        Case{63, 24, 16384, DType::kF32, 0, 1, K::kFewRows, 1, 8, 16},
                        Case{16, 24, 16384, DType::kF32, 0, 1, K::kFewRows, 1, 8, 16},
                        Case{1, 24, 16384, DType::kF32, 0, 1, K::kFewRows, 1, 1, 16},
                        Case{4096, 64, 4096, DType::kBF16, 0, 1, K::kTensorCores, 0, 0, 0},
                        Case{2048, 24, 16384, DType::kF32, 1, 1, K::kFewRows, 1, 8, 16},
                        Case{2048, 24, 1002, DType::kF32, 0, 1, K::kFewRows, 1, 8, 16},
                        Case{2048, 65, 4096, DType::kF32, 0, 1, K::kFewRows, 1, 8, 16},
                        Case{2048, 48, 512, DType::kF32, 0, 2, K::kFewRows, 1, 8, 16}}) {
    SCOPED_TRACE(std::to_string(c.t) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) +
                 " " + std::string(dtype_name(c.dtype)) + "+" + std::to_string(c.x_offset) +
                 " in " + std::to_string(c.groups));
    const LinearOperands o = operands(c.t, c.n, c.k, c.dtype, c.x_offset, c.groups);
    const cuda::DensePlan plan = cuda::plan_dense(o, c.groups, 132);
    EXPECT_EQ(plan.kernel, c.kernel) << cuda::describe(plan);
    if (c.kernel == K::kTensorCores) continue;
    EXPECT_EQ(plan.cols, c.cols) << cuda::describe(plan);
    EXPECT_EQ(plan.tokens, c.tokens) << cuda::describe(plan);
    EXPECT_EQ(plan.split, c.split) << cuda::describe(plan);
  }
}

// The three-way bf16 split of x loses no bit on either tensor-core kernel (70 rows, and 8 rows
// over a K the few-rows kernel takes): with a one-hot weight row n (a power of two 2^e_n at
// column n mod K) every sum is exact, so y[t, n] must be x[t, n mod K] · 2^e_n bit for bit.
// Keeping only two parts (16 significant bits) would miss it on almost every element.
TEST(DenseOpsCuda, LinearOnTensorCoresKeepsEveryBitOfX) {
  SeededRng rng;
  constexpr int64_t kN = 4100;
  for (const auto& [t, k] : {std::pair<int64_t, int64_t>{70, 40}, {8, 64}}) {
    SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(k));
    const OpPair x = OpPair::uniform(rng, {t, k});
    std::vector<uint16_t> bits(static_cast<size_t>(kN * k), 0);
    std::vector<int> exponents(kN);
    for (int64_t n = 0; n < kN; ++n) {
      exponents[n] = static_cast<int>(rng.uniform(-8.0, 8.0));
      bits[n * k + n % k] = float_to_bf16(std::ldexp(1.0f, exponents[n]));
    }
    const OpPair w = OpPair::values(DType::kBF16, {kN, k}, bits);
    const OpPair y = OpPair::poisoned(DType::kF32, {t, kN});
    ASSERT_TRUE(linear(x.d(), w.d(), y.d()).ok());
    const Tensor got = y.result();
    int64_t mismatches = 0;
    for (int64_t row = 0; row < t; ++row) {
      for (int64_t n = 0; n < kN; ++n) {
        const float want = std::ldexp(x.host.data_as<float>()[row * k + n % k], exponents[n]);
        mismatches += got.data_as<float>()[row * kN + n] != want;
      }
    }
    EXPECT_EQ(mismatches, 0);
  }
}

// 17-31 rows of x (a verify step of 8 sequences × 3 rows is 24) take the tensor-core kernel
// that 32 take, and each row keeps its bits between them: the rows of a 24-row call are the
// first rows of the same x with 8 more, bit for bit (so a batch padded to 32 rows is its
// unpadded step), and within tolerance of the CPU. Plain and block-diagonal (wo_a's 8 groups).
TEST(DenseOpsCuda, SeventeenToThirtyOneRowsRunAsThirtyTwoWithTheirBits) {
  SeededRng rng;
  for (const auto& [t, g, r, k] :
       {std::tuple{17, 1, 4100, 96}, {24, 1, 4100, 264}, {31, 8, 520, 136}, {24, 8, 1024, 64}}) {
    SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(g) + "x" + std::to_string(r) + "x" +
                 std::to_string(k));
    std::vector<uint16_t> bits(static_cast<size_t>(g * r * k));
    for (uint16_t& b : bits) b = float_to_bf16(static_cast<float>(rng.uniform(-1.0, 1.0)));
    const OpPair w = OpPair::values(DType::kBF16, {g * r, k}, bits);
    const OpPair x = OpPair::uniform(rng, {32, g * k});
    const OpPair y = OpPair::poisoned(DType::kF32, {t, g * r});
    const OpPair y32 = OpPair::poisoned(DType::kF32, {32, g * r});
    const TensorView x_d = x.d().rows(0, t);
    for (const int64_t rows : {static_cast<int64_t>(t), int64_t{32}}) {
      const cuda::DensePlan plan = cuda::plan_for(
          block_diagonal_operands(x.d().rows(0, rows), w.d(), g, y32.d().rows(0, rows)), g);
      EXPECT_EQ(plan.kernel, cuda::DenseKernel::kTensorCores)
          << rows << " rows: " << cuda::describe(plan);
    }
    ASSERT_TRUE(block_diagonal_linear(x.h().rows(0, t), w.h(), g, y.h()).ok());
    ASSERT_TRUE(block_diagonal_linear(x_d, w.d(), g, y.d()).ok());
    ASSERT_TRUE(block_diagonal_linear(x.d(), w.d(), g, y32.d()).ok());
    const Tensor all = y32.result();
    EXPECT_TRUE(testing::same_bytes(y.result().view(), all.view().rows(0, t)));
    EXPECT_LT(device_vs_host_error(y), kCudaF32OpRelTol);
  }
}

// The block-diagonal linear (the attention's wo_a): V4-Flash's 8 groups of 1024 at one token,
// groups of 6 outputs (not a multiple of 4), and the tiled kernel group by group.
TEST(DenseOpsCuda, BlockDiagonalLinearMatchesCpu) {
  SeededRng rng;
  for (const auto& [t, g, r, k] : {std::tuple{1, 8, 1024, 64}, {5, 4, 6, 33}, {130, 2, 4100, 33}}) {
    SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(g) + "x" + std::to_string(r) + "x" +
                 std::to_string(k));
    const OpPair x = OpPair::uniform(rng, {t, g * k});
    const OpPair w = OpPair::uniform(rng, {g * r, k});
    const OpPair y = OpPair::poisoned(DType::kF32, {t, g * r});
    ASSERT_TRUE(block_diagonal_linear(x.h(), w.h(), g, y.h()).ok());
    ASSERT_TRUE(block_diagonal_linear(x.d(), w.d(), g, y.d()).ok());
    EXPECT_LT(device_vs_host_error(y), kCudaF32OpRelTol);
  }
}

// rms_norm sums its squares in one lane order on both devices (ops.h), so the bits agree: a
// block a row below 2048 columns (from registers: one or two passes of the lanes), a cluster of
// 8 blocks a row from there to 32768 (4, 16 or 32 elements a lane in registers), a block a row
// streaming past it (cuda/ops/rms_norm.cu), rows with and without the batched loads' tails,
// narrower than the 1024 lanes and wider.
TEST(DenseOpsCuda, RmsNormGivesTheCpuBits) {
  SeededRng rng;
  for (const auto& [t, d] : {std::pair{1, 1},
                             {5, 33},
                             {1, 1024},
                             {32, 1024},
                             {67, 1025},
                             {3, 2047},
                             {1, 2048},
                             {5, 2100},
                             {2, 4096},
                             {64, 4096},
                             {2, 9000},
                             {1, 16384},
                             {8, 16384},
                             {32, 16384},
                             {1, 28672},
                             {2, 32768},
                             {1, 33000}}) {
    SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(d));
    // Magnitudes spread over 2^±20, so that an order other than the lanes' shows in the bits.
    Tensor values = Tensor::host(DType::kF32, {t, d});
    for (int64_t i = 0; i < values.numel(); ++i) {
      values.data_as<float>()[i] = std::ldexp(static_cast<float>(rng.uniform(-2.0, 2.0)),
                                              static_cast<int>(rng.uniform_int(-20, 20)));
    }
    const OpPair spread = OpPair::of(std::move(values));
    const OpPair weight = OpPair::uniform(rng, {d});
    const OpPair y = OpPair::poisoned(DType::kF32, {t, d});
    ASSERT_TRUE(rms_norm(spread.h(), weight.h(), 1e-6f, y.h()).ok());
    ASSERT_TRUE(rms_norm(spread.d(), weight.d(), 1e-6f, y.d()).ok());
    EXPECT_TRUE(device_equals_host(y));
    // Unweighted and in place.
    const OpPair z = OpPair::uniform(rng, {t, d}, -3.0, 3.0);
    ASSERT_TRUE(rms_norm(z.h(), TensorView{}, 1e-6f, z.h()).ok());
    ASSERT_TRUE(rms_norm(z.d(), TensorView{}, 1e-6f, z.d()).ok());
    EXPECT_TRUE(device_equals_host(z));
  }
  // Rows on which another summation order gives other bits (dense_ops_test.cpp proves it).
  for (const int64_t d : {1024, 4096, 16384}) {
    SCOPED_TRACE(d);
    const OpPair x = OpPair::values(DType::kF32, {2, d}, [&] {
      std::vector<float> rows = testing::rms_norm_order_row(d);
      rows.insert(rows.end(), rows.begin(), rows.end());
      return rows;
    }());
    const OpPair y = OpPair::poisoned(DType::kF32, {2, d});
    ASSERT_TRUE(rms_norm(x.h(), TensorView{}, testing::kRmsNormOrderEps, y.h()).ok());
    ASSERT_TRUE(rms_norm(x.d(), TensorView{}, testing::kRmsNormOrderEps, y.d()).ok());
    EXPECT_TRUE(device_equals_host(y));
  }
}

TEST(DenseOpsCuda, SoftmaxSwigluMatchCpu) {
  SeededRng rng;
  // Rows wide enough for the batched loads, with and without a tail.
  for (const auto& [t, d] :
       {std::pair{1, 1}, {5, 33}, {67, 1025}, {5, 2100}, {2, 9000}, {1, 16384}}) {
    SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(d));
    // Softmax in place, logits wide enough that the max matters.
    const OpPair s = OpPair::uniform(rng, {t, d}, -30.0, 30.0);
    ASSERT_TRUE(softmax(s.h(), s.h()).ok());
    ASSERT_TRUE(softmax(s.d(), s.d()).ok());
    EXPECT_LT(device_vs_host_error(s), kCudaF32OpRelTol);
    // SwiGLU with and without the clamp (values beyond the limit on both sides).
    for (const float limit : {0.0f, 2.5f}) {
      const OpPair gate_up = OpPair::uniform(rng, {t, 2 * d}, -6.0, 6.0);
      const OpPair out = OpPair::poisoned(DType::kF32, {t, d});
      ASSERT_TRUE(swiglu(gate_up.h(), limit, out.h()).ok());
      ASSERT_TRUE(swiglu(gate_up.d(), limit, out.d()).ok());
      EXPECT_LT(device_vs_host_error(out), kCudaF32OpRelTol) << "limit " << limit;
    }
  }
}

TEST(DenseOpsCuda, AddAndEmbeddingAreBitIdentical) {
  SeededRng rng;
  const OpPair a = OpPair::uniform(rng, {7, 3, 129});
  const OpPair b = OpPair::uniform(rng, {7, 3, 129});
  const OpPair y = OpPair::poisoned(DType::kF32, {7, 3, 129});
  ASSERT_TRUE(add(a.h(), b.h(), y.h()).ok());
  ASSERT_TRUE(add(a.d(), b.d(), y.d()).ok());
  EXPECT_TRUE(device_equals_host(y));

  const int64_t v = 37, n_tokens = 11;
  std::vector<int64_t> ids(n_tokens);
  for (int64_t& id : ids) id = rng.uniform_int(0, v - 1);
  const OpPair id_pair = OpPair::values(DType::kI64, {n_tokens}, ids);
  // Rows of 268 bytes (copied byte by byte) and of 1024 (16 bytes a load).
  for (const int64_t width : {67, 256}) {
    const OpPair table = OpPair::uniform(rng, {v, width});
    const OpPair rows = OpPair::poisoned(DType::kF32, {n_tokens, width});
    ASSERT_TRUE(embedding(table.h(), id_pair.h(), rows.h()).ok());
    ASSERT_TRUE(embedding(table.d(), id_pair.d(), rows.d()).ok());
    EXPECT_TRUE(device_equals_host(rows)) << width;
  }
  // An i64 table (tid2eid rows).
  std::vector<int64_t> experts(v * 3);
  for (int64_t& e : experts) e = rng.uniform_int(0, 1000);
  const OpPair tid2eid = OpPair::values(DType::kI64, {v, 3}, experts);
  const OpPair picked = OpPair::poisoned(DType::kI64, {n_tokens, 3});
  ASSERT_TRUE(embedding(tid2eid.h(), id_pair.h(), picked.h()).ok());
  ASSERT_TRUE(embedding(tid2eid.d(), id_pair.d(), picked.d()).ok());
  EXPECT_TRUE(device_equals_host(picked));
}

// Rows of two buffers, out of order and one twice, each device row's address beside its host
// twin's: the device gathers the bits the CPU does, at widths copied byte by byte (268 bytes)
// and 16 bytes a load (1024).
TEST(DenseOpsCuda, GatherRowsIsBitIdentical) {
  SeededRng rng;
  const std::vector<std::pair<int, int64_t>> picks = {{1, 2}, {0, 0}, {1, 2}, {0, 4}, {1, 1}};
  const auto n = static_cast<int64_t>(picks.size());
  for (const int64_t width : {67, 256}) {
    const OpPair buffers[2] = {OpPair::uniform(rng, {5, width}), OpPair::uniform(rng, {3, width})};
    std::vector<int64_t> host_rows, device_rows;
    for (const auto& [buffer, row] : picks) {
      host_rows.push_back(reinterpret_cast<int64_t>(buffers[buffer].h().rows(row, row + 1).data));
      device_rows.push_back(
          reinterpret_cast<int64_t>(buffers[buffer].d().rows(row, row + 1).data));
    }
    const OpPair host_table = OpPair::values(DType::kI64, {n}, host_rows);
    const OpPair device_table = OpPair::values(DType::kI64, {n}, device_rows);
    const OpPair y = OpPair::poisoned(DType::kF32, {n, width});
    ASSERT_TRUE(gather_rows(host_table.h(), y.h()).ok());
    ASSERT_TRUE(gather_rows(device_table.d(), y.d()).ok());
    EXPECT_TRUE(device_equals_host(y)) << width;
  }
}

// Blocks of several sizes, aligned (16 bytes a load) and not, between two buffers on each side,
// their addresses in each side's tables: the device's buffers end with the host's bytes.
TEST(DenseOpsCuda, CopyBlocksIsBitIdentical) {
  SeededRng rng;
  const OpPair from = OpPair::uniform(rng, {64, 33});
  const OpPair to = OpPair::poisoned(DType::kF32, {48, 33});
  // {source row, destination row, rows, bytes past the rows}: row offsets of 132 bytes keep
  // some blocks off 16-byte boundaries.
  const std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>> blocks = {
      {0, 0, 4, 0}, {7, 5, 3, 8}, {20, 12, 30, 0}, {60, 44, 1, 4}};
  struct Tables {
    OpPair sources, destinations, bytes;
  };
  const auto tables_of = [&](const OpPair& f, const OpPair& t, bool device) {
    std::vector<int64_t> sources, destinations, bytes;
    for (const auto& [source, destination, rows, extra] : blocks) {
      const TensorView& fv = device ? f.d() : f.h();
      const TensorView& tv = device ? t.d() : t.h();
      sources.push_back(reinterpret_cast<int64_t>(fv.rows(source, source + 1).data));
      destinations.push_back(reinterpret_cast<int64_t>(tv.rows(destination, destination + 1).data));
      bytes.push_back(rows * 33 * static_cast<int64_t>(sizeof(float)) + extra);
    }
    const auto n = static_cast<int64_t>(blocks.size());
    return Tables{OpPair::values(DType::kI64, {n}, sources),
                  OpPair::values(DType::kI64, {n}, destinations),
                  OpPair::values(DType::kI64, {n}, bytes)};
  };
  const Tables host = tables_of(from, to, false), device = tables_of(from, to, true);
  ASSERT_TRUE(copy_blocks(host.sources.h(), host.destinations.h(), host.bytes.h()).ok());
  ASSERT_TRUE(copy_blocks(device.sources.d(), device.destinations.d(), device.bytes.d()).ok());
  EXPECT_TRUE(device_equals_host(to));
}

TEST(HyperConnectionsCuda, MixesMatchCpuAndStreamOpsAreBitIdentical) {
  SeededRng rng;
  // M ≤ 5 runs the Sinkhorn a warp a token (each M its own unrolled instantiation), M = 6 a
  // thread a token (cuda/hyper_connections.cu).
  for (const auto& [t, m, d] :
       {std::tuple{2, 1, 5}, {1, 2, 1}, {5, 3, 33}, {32, 4, 130}, {7, 5, 9}, {3, 6, 17}}) {
    SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(m) + "x" + std::to_string(d));
    const OpPair mixes = OpPair::uniform(rng, {t, (2 + m) * m}, -2.0, 2.0);
    const OpPair scale = OpPair::uniform(rng, {3}, 0.1, 2.0);
    const OpPair base = OpPair::uniform(rng, {(2 + m) * m});
    const OpPair pre = OpPair::poisoned(DType::kF32, {t, m});
    const OpPair post = OpPair::poisoned(DType::kF32, {t, m});
    const OpPair comb = OpPair::poisoned(DType::kF32, {t, m, m});
    ASSERT_TRUE(hc_split_sinkhorn(mixes.h(), scale.h(), base.h(), 20, 1e-6f,
                                  HcMix{pre.h(), post.h(), comb.h()})
                    .ok());
    ASSERT_TRUE(hc_split_sinkhorn(mixes.d(), scale.d(), base.d(), 20, 1e-6f,
                                  HcMix{pre.d(), post.d(), comb.d()})
                    .ok());
    EXPECT_LT(device_vs_host_error(pre), kCudaF32OpRelTol);
    EXPECT_LT(device_vs_host_error(post), kCudaF32OpRelTol);
    EXPECT_LT(device_vs_host_error(comb), kCudaF32OpRelTol);

    const OpPair head_mix = OpPair::uniform(rng, {t, m}, -2.0, 2.0);
    const OpPair head_base = OpPair::uniform(rng, {m});
    const OpPair head_pre = OpPair::poisoned(DType::kF32, {t, m});
    ASSERT_TRUE(
        hc_head_weights(head_mix.h(), scale.h().rows(0, 1), head_base.h(), 1e-6f, head_pre.h())
            .ok());
    ASSERT_TRUE(
        hc_head_weights(head_mix.d(), scale.d().rows(0, 1), head_base.d(), 1e-6f, head_pre.d())
            .ok());
    EXPECT_LT(device_vs_host_error(head_pre), kCudaF32OpRelTol);

    // The stream ops take the host's mixes on both devices, so they must agree to the bit.
    const OpPair x = OpPair::uniform(rng, {t, d});
    const OpPair streams = OpPair::poisoned(DType::kF32, {t, m, d});
    ASSERT_TRUE(hc_repeat(x.h(), streams.h()).ok());
    ASSERT_TRUE(hc_repeat(x.d(), streams.d()).ok());
    EXPECT_TRUE(device_equals_host(streams));
    const OpPair residual = OpPair::uniform(rng, {t, m, d});
    const OpPair weights = OpPair::of(testing::to_host(pre.h()));
    const OpPair collapsed = OpPair::poisoned(DType::kF32, {t, d});
    ASSERT_TRUE(hc_collapse(residual.h(), weights.h(), collapsed.h()).ok());
    ASSERT_TRUE(hc_collapse(residual.d(), weights.d(), collapsed.d()).ok());
    EXPECT_TRUE(device_equals_host(collapsed));
    const OpPair place = OpPair::of(testing::to_host(post.h()));
    const OpPair mixer = OpPair::of(testing::to_host(comb.h()));
    const OpPair expanded = OpPair::poisoned(DType::kF32, {t, m, d});
    ASSERT_TRUE(
        hc_expand(x.h(), TensorView{}, residual.h(), place.h(), mixer.h(), expanded.h()).ok());
    ASSERT_TRUE(
        hc_expand(x.d(), TensorView{}, residual.d(), place.d(), mixer.d(), expanded.d()).ok());
    EXPECT_TRUE(device_equals_host(expanded));
  }
}
// The FFN site's expand with the shared expert's half as f_addend, at V4-Flash's M = 4,
// D = 4096 and decode T (1, 2, 8) and beyond (64): the bits of add, then hc_expand, the unfused
// composition it replaces, on the device and on the CPU.
TEST(HyperConnectionsCuda, ExpandWithAddendIsTheAddThenTheExpand) {
  SeededRng rng;
  const int64_t m = 4, d = 4096;
  for (const int64_t t : {1, 2, 8, 64}) {
    SCOPED_TRACE("T = " + std::to_string(t));
    const OpPair routed = OpPair::uniform(rng, {t, d}), shared = OpPair::uniform(rng, {t, d});
    const OpPair residual = OpPair::uniform(rng, {t, m, d});
    const OpPair post = OpPair::uniform(rng, {t, m}, 0.0, 2.0);
    const OpPair comb = OpPair::uniform(rng, {t, m, m}, 0.0, 1.0);
    const OpPair fused = OpPair::poisoned(DType::kF32, {t, m, d});
    ASSERT_TRUE(
        hc_expand(routed.h(), shared.h(), residual.h(), post.h(), comb.h(), fused.h()).ok());
    ASSERT_TRUE(
        hc_expand(routed.d(), shared.d(), residual.d(), post.d(), comb.d(), fused.d()).ok());
    EXPECT_TRUE(device_equals_host(fused));
    const OpPair sum = OpPair::poisoned(DType::kF32, {t, d});
    const OpPair parts = OpPair::poisoned(DType::kF32, {t, m, d});
    ASSERT_TRUE(add(routed.d(), shared.d(), sum.d()).ok());
    ASSERT_TRUE(hc_expand(sum.d(), TensorView{}, residual.d(), post.d(), comb.d(), parts.d()).ok());
    EXPECT_TRUE(dsv4::testing::same_bytes(dsv4::testing::to_host(fused.d()).view(),
                                          dsv4::testing::to_host(parts.d()).view()));
  }
}

// The fused mHC ops against their parts: hc_pre_norm gives the bits of the device's
// hc_split_sinkhorn, hc_collapse and rms_norm (its mixes match the CPU's to the device expf's
// ulps, as the parts do), hc_expand_norm the CPU's bits (its parts are bit-identical). Shapes:
// decode batches of V4-Flash's width (B = 1, 8, 32: 4 and 16 elements a lane, the expand's lanes
// holding whole columns), widths of 1024 and 8192 (whole columns at 4 and 32 elements a lane), a
// width of 7168 (16 and 32 elements a lane, not whole columns), one past the expand's registers
// (9000: the expand and norm run as their parts), a few tokens, enough tokens for several Sinkhorn
// clusters, and M ≠ 4 (the parts; M = 6 a thread a token's Sinkhorn).
TEST(HyperConnectionsCuda, FusedPreAndExpandGiveTheirPartsBits) {
  SeededRng rng;
  for (const auto& [t, m, d] : {std::tuple{1, 4, 4096},
                                {8, 4, 4096},
                                {32, 4, 4096},
                                {1, 4, 7168},
                                {4, 4, 1024},
                                {2, 4, 8192},
                                {2, 4, 9000},
                                {3, 4, 1000},
                                {5, 3, 33},
                                {70, 4, 130},
                                {300, 6, 17},
                                {2, 6, 2048}}) {
    SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(m) + "x" + std::to_string(d));
    const testing::HcPreNormInputs in(rng, t, m, d);
    const OpPair& streams = in.streams;
    const auto poisoned = [&](Shape shape) { return OpPair::poisoned(DType::kF32, shape); };
    const OpPair pre = poisoned({t, m}), post = poisoned({t, m}), comb = poisoned({t, m, m});
    const OpPair y = poisoned({t, d});
    ASSERT_TRUE(hc_pre_norm(in.params(false, pre, post, comb, y)).ok());
    ASSERT_TRUE(hc_pre_norm(in.params(true, pre, post, comb, y)).ok());
    // The parts on the device, into buffers of their own.
    const OpPair pre2 = poisoned({t, m}), post2 = poisoned({t, m}), comb2 = poisoned({t, m, m});
    const OpPair y2 = poisoned({t, d});
    ASSERT_TRUE(hc_split_sinkhorn(in.mixes.d(), in.scale.d(), in.base.d(), 20, 1e-6f,
                                  HcMix{pre2.d(), post2.d(), comb2.d()})
                    .ok());
    ASSERT_TRUE(hc_collapse(streams.d(), pre2.d(), y2.d()).ok());
    ASSERT_TRUE(rms_norm(y2.d(), in.weight.d(), 1e-6f, y2.d()).ok());
    for (const auto& [fused, parts] :
         {std::pair{&pre, &pre2}, {&post, &post2}, {&comb, &comb2}, {&y, &y2}}) {
      EXPECT_TRUE(testing::same_bytes(fused->result().view(), parts->result().view()));
    }
    EXPECT_LT(device_vs_host_error(y), kCudaF32OpRelTol);
    EXPECT_LT(device_vs_host_error(comb), kCudaF32OpRelTol);

    // The expand and the next site's norm, from the host's mixes on both devices.
    const OpPair place = OpPair::of(testing::to_host(post.h()));
    const OpPair mixer = OpPair::of(testing::to_host(comb.h()));
    const OpPair block_out = OpPair::uniform(rng, {t, d}), addend = OpPair::uniform(rng, {t, d});
    for (const bool with_addend : {false, true}) {
      SCOPED_TRACE(with_addend ? "an addend" : "no addend");
      const TensorView add_h = with_addend ? addend.h() : TensorView{};
      const TensorView add_d = with_addend ? addend.d() : TensorView{};
      const OpPair out = poisoned({t, m, d}), normed = poisoned({t, m * d});
      ASSERT_TRUE(hc_expand_norm(block_out.h(), add_h, streams.h(), place.h(), mixer.h(), 1e-6f,
                                 out.h(), normed.h())
                      .ok());
      ASSERT_TRUE(hc_expand_norm(block_out.d(), add_d, streams.d(), place.d(), mixer.d(), 1e-6f,
                                 out.d(), normed.d())
                      .ok());
      EXPECT_TRUE(device_equals_host(out));
      EXPECT_TRUE(device_equals_host(normed));
    }
  }
}

// Routing (score and hash), grouping, gather, the dense experts' GEMM and the combine, each
// step fed the host's result of the previous one so that every comparison is of one op.
TEST(MoeDispatchCuda, RouteGroupGatherGemmCombineMatchCpu) {
  SeededRng rng;
  for (const auto& [t, e, k, d] : {std::tuple{1, 4, 1, 16}, {9, 7, 3, 33}, {67, 16, 6, 130}}) {
    SCOPED_TRACE(std::to_string(t) + " tokens, " + std::to_string(e) + " experts, top " +
                 std::to_string(k));
    const OpPair logits = OpPair::uniform(rng, {t, e}, -4.0, 4.0);
    const OpPair bias = OpPair::uniform(rng, {e}, -0.3, 0.3);
    const OpPair weights = OpPair::poisoned(DType::kF32, {t, k});
    const OpPair ids = OpPair::poisoned(DType::kI32, {t, k});
    ASSERT_TRUE(moe_route(logits.h(), bias.h(), TensorView{}, 1.5f, {weights.h(), ids.h()}).ok());
    ASSERT_TRUE(moe_route(logits.d(), bias.d(), TensorView{}, 1.5f, {weights.d(), ids.d()}).ok());
    EXPECT_TRUE(device_equals_host(ids));
    EXPECT_LT(device_vs_host_error(weights), kCudaF32OpRelTol);
    std::vector<int64_t> hashed(t * k);
    for (int64_t& id : hashed) id = rng.uniform_int(0, e - 1);
    const OpPair hash_ids = OpPair::values(DType::kI64, {t, k}, hashed);
    const OpPair hash_weights = OpPair::poisoned(DType::kF32, {t, k});
    const OpPair hash_picks = OpPair::poisoned(DType::kI32, {t, k});
    ASSERT_TRUE(
        moe_route(logits.h(), TensorView{}, hash_ids.h(), 1.0f, {hash_weights.h(), hash_picks.h()})
            .ok());
    ASSERT_TRUE(
        moe_route(logits.d(), TensorView{}, hash_ids.d(), 1.0f, {hash_weights.d(), hash_picks.d()})
            .ok());
    EXPECT_TRUE(device_equals_host(hash_picks));
    EXPECT_LT(device_vs_host_error(hash_weights), kCudaF32OpRelTol);

    const int64_t r = t * k;
    const OpPair routed = OpPair::of(testing::to_host(hash_picks.h()));  // empty experts likely
    const OpPair order = OpPair::poisoned(DType::kI32, {r});
    const OpPair offsets = OpPair::poisoned(DType::kI32, {e + 1});
    ASSERT_TRUE(moe_group(routed.h(), order.h(), offsets.h()).ok());
    ASSERT_TRUE(moe_group(routed.d(), order.d(), offsets.d()).ok());
    EXPECT_TRUE(device_equals_host(order));
    EXPECT_TRUE(device_equals_host(offsets));

    const OpPair x = OpPair::uniform(rng, {t, d});
    const OpPair rows = OpPair::poisoned(DType::kF32, {r, d});
    ASSERT_TRUE(moe_gather(x.h(), order.h(), rows.h()).ok());
    ASSERT_TRUE(moe_gather(x.d(), order.d(), rows.d()).ok());
    EXPECT_TRUE(device_equals_host(rows));

    const int64_t n = 2 * d + 3;
    const OpPair w = OpPair::uniform(rng, {e, n, d});
    const OpPair expert_out = OpPair::poisoned(DType::kF32, {r, n});
    ASSERT_TRUE(grouped_linear(rows.h(), w.h(), offsets.h(), expert_out.h()).ok());
    ASSERT_TRUE(grouped_linear(rows.d(), w.d(), offsets.d(), expert_out.d()).ok());
    EXPECT_LT(device_vs_host_error(expert_out), kCudaF32OpRelTol);

    const OpPair y = OpPair::uniform(rng, {r, d});
    const OpPair route_weights = OpPair::uniform(rng, {t, k}, 0.0, 1.0);
    const OpPair combined = OpPair::poisoned(DType::kF32, {t, d});
    ASSERT_TRUE(moe_combine(y.h(), order.h(), route_weights.h(), combined.h()).ok());
    ASSERT_TRUE(moe_combine(y.d(), order.d(), route_weights.d(), combined.d()).ok());
    EXPECT_TRUE(device_equals_host(combined));
  }
}

}  // namespace
}  // namespace dsv4::kernels

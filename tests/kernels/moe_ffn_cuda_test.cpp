// The CUDA MoE block (kernels/cuda/moe/) against the CPU moe_ffn (label cuda: needs the H200),
// on both paths at every T: the fused decode kernels and the sm90 grouped GEMMs. Routing regimes
// from moe_test_layer.h (skewed, experts with no tokens, every token to the same experts, hash
// routing); T = 1, T off every tile (7, 300), the decode limit (64); and a wider layer whose
// fused kernels loop over several work units per block. The output is poisoned before each run,
// and two runs must give the same bits.
//
// Dimension letters: T tokens, D model width.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "base/buffer.h"
#include "kernels/cuda/moe/kernels.h"
#include "kernels/cuda/moe/moe_pipeline.h"
#include "kernels/ops.h"
#include "moe_test_layer.h"
#include "moe_test_layer_device.h"
#include "testing/compare.h"
#include "testing/device.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4::kernels {
namespace {

using cuda::moe::MoePath;
using moe_test::MoeTestLayer;
using moe_test::on_device;
using moe_test::Routing;

using dsv4::testing::to_device;

// What the op is given besides the routed experts (moe_ffn_test.cpp has the same variants
// against float64).
enum class Variant {
  kSharedExpert,        // the NVFP4 shared expert inside the op; dynamic W4A4 scales
  kRoutedOnly,          // no shared expert
  kStaticScales,        // calibrated W4A4 input scales, below the data's range (some saturate)
  kRoutedInHostMemory,  // the routed experts read over PCIe from mapped host memory (offload)
  kTouchedCopies,       // the same, the op copying the experts it touches to the device first
};

bool routed_in_host_memory(Variant variant) {
  return variant == Variant::kRoutedInHostMemory || variant == Variant::kTouchedCopies;
}

// MoeWeightsView::touched_copies for a layer's routed experts: device buffers filled with 0xFF
// before each run (UE4M3 NaN scales, so an expert the op reads but did not copy shows), which
// also tell afterwards how many experts the op copied.
class PoisonedCopies {
 public:
  explicit PoisonedCopies(const MoeTestLayer& layer) {
    for (const Tensor* bulk :
         {&layer.w13.packed, &layer.w13.block_scale, &layer.w2.packed, &layer.w2.block_scale}) {
      Result<Tensor> t = Tensor::empty(DType::kU8, bulk->shape(), Device::kCuda);
      DSV4_CHECK(t.ok(), "%s", t.status().to_string().c_str());
      bulks_.push_back(std::move(t).value());
    }
  }
  ExpertBulkCopies views() const {
    return {bulks_[0].view(), bulks_[1].view(), bulks_[2].view(), bulks_[3].view()};
  }
  void poison() const {
    for (const Tensor& t : bulks_) {
      ASSERT_EQ(cudaMemset(t.view().data, 0xFF, t.view().bytes()), cudaSuccess);
    }
  }
  // Experts whose w13 codes are no longer all 0xFF.
  int64_t n_copied() const {
    const Tensor codes = dsv4::testing::to_host(bulks_[0].view());
    const int64_t n = codes.shape()[0], bytes = codes.view().bytes() / n;
    const auto* data = codes.view().data_as<const uint8_t>();
    int64_t copied = 0;
    for (int64_t e = 0; e < n; ++e) {
      copied += std::any_of(data + e * bytes, data + (e + 1) * bytes,
                            [](uint8_t b) { return b != 0xFF; });
    }
    return copied;
  }

 private:
  std::vector<Tensor> bulks_;
};

void apply(Variant variant, MoeTestLayer& layer) {
  layer.with_shared = variant != Variant::kRoutedOnly;
  if (variant != Variant::kStaticScales) return;
  layer.w13_input_scale = Tensor::host(DType::kF32, {1});
  layer.w13_input_scale.data_as<float>()[0] = 0.8f / 2688.0f;
  layer.w2_input_scale = Tensor::host(DType::kF32, {1});
  layer.w2_input_scale.data_as<float>()[0] = 1.0f / 2688.0f;
}

struct LayerSize {
  int64_t dim, ffn, n_experts, k_used;
};

// One layer of `size`, one input of n_tokens: the CUDA path against the CPU moe_ffn, twice.
void check_against_cpu(const LayerSize& size, int n_tokens, Routing routing, MoeMode mode,
                       MoePath path, Variant variant = Variant::kSharedExpert) {
  dsv4::testing::SeededRng rng;
  MoeTestLayer layer =
      moe_test::make_moe_layer(rng, size.dim, size.ffn, size.n_experts, size.k_used, routing, mode);
  apply(variant, layer);
  const bool hash = routing == Routing::kHash;
  std::vector<float> x = moe_test::random_moe_input(rng, n_tokens, layer.dim);
  std::vector<int64_t> ids = moe_test::random_token_ids(rng, n_tokens, layer.vocab);
  const Shape shape{n_tokens, layer.dim};
  const TensorView x_host = TensorView::contiguous(x.data(), DType::kF32, Device::kCpu, shape);
  const TensorView ids_host =
      TensorView::contiguous(ids.data(), DType::kI64, Device::kCpu, {n_tokens});
  std::vector<float> expected(x.size(), std::numeric_limits<float>::quiet_NaN());
  ASSERT_TRUE(moe_ffn(x_host, ids_host, layer.view(hash), layer.config, TensorView{},
                      TensorView::contiguous(expected.data(), DType::kF32, Device::kCpu, shape))
                  .ok());

  const MoeTestLayer device = on_device(layer, routed_in_host_memory(variant));
  MoeWeightsView weights = device.view(hash);
  std::optional<PoisonedCopies> copies;
  if (variant == Variant::kTouchedCopies) weights.touched_copies = copies.emplace(device).views();
  const Tensor x_dev = to_device(x_host), ids_dev = to_device(ids_host);
  const int64_t ws_bytes = moe_ffn_workspace_bytes(n_tokens, weights, layer.config);
  Result<Tensor> ws = Tensor::empty(DType::kU8, {ws_bytes}, Device::kCuda);
  ASSERT_TRUE(ws.ok());
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    std::vector<float> poison(x.size(), std::numeric_limits<float>::quiet_NaN());
    const Tensor y_dev =
        to_device(TensorView::contiguous(poison.data(), DType::kF32, Device::kCpu, shape));
    if (copies) copies->poison();
    const Status status = cuda::moe::moe_ffn_on_path(x_dev.view(), ids_dev.view(), weights,
                                                     layer.config, ws->view(), y_dev.view(), path);
    if (status.code() == StatusCode::kUnimplemented) GTEST_SKIP() << status.message();
    ASSERT_TRUE(status.ok()) << status.message();
    if (copies) {  // the touched experts only (the output check below says all of them)
      const int64_t n_copied = copies->n_copied();
      EXPECT_GE(n_copied, 1);
      EXPECT_LE(n_copied, std::min<int64_t>(layer.n_experts, n_tokens * layer.k_used));
    }
    std::vector<float> y(x.size());
    ASSERT_TRUE(copy_tensor(TensorView::contiguous(y.data(), DType::kF32, Device::kCpu, shape),
                            y_dev.view())
                    .ok());
    runs.push_back(std::move(y));
  }
  if (mode == MoeMode::kW4A16) {
    EXPECT_LT(
        dsv4::testing::max_row_rel_error(runs[0].data(), expected.data(), n_tokens, layer.dim),
        dsv4::testing::kMoeW4A16RelTol);
  } else {
    EXPECT_LT(
        dsv4::testing::max_row_rel_error(runs[0].data(), expected.data(), 1, n_tokens * layer.dim),
        dsv4::testing::kMoeW4A4RelTol);
  }
  EXPECT_EQ(std::memcmp(runs[0].data(), runs[1].data(), sizeof(float) * x.size()), 0)
      << "two runs on the same input differ";
}

class MoeFfnCudaTest : public ::testing::TestWithParam<std::tuple<int, Routing, MoeMode, MoePath>> {
};

TEST_P(MoeFfnCudaTest, MatchesCpuAndRepeatsBitwise) {
  const auto [n_tokens, routing, mode, path] = GetParam();
  check_against_cpu(LayerSize{256, 128, 16, 4}, n_tokens, routing, mode, path);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MoeFfnCudaTest,
                         ::testing::Combine(::testing::Values(1, 7, 64, 300),
                                            ::testing::Values(Routing::kScore, Routing::kSkewed,
                                                              Routing::kOneSet, Routing::kHash),
                                            ::testing::Values(MoeMode::kW4A16, MoeMode::kW4A4),
                                            ::testing::Values(MoePath::kFused, MoePath::kGrouped)));

// Without the shared expert (the model's call when its shared expert is dense), with static
// W4A4 scales (a calibrated checkpoint) and with the routed experts in host memory (read in
// place, or the touched ones copied to the device first), on both paths.
class MoeFfnCudaVariantTest
    : public ::testing::TestWithParam<std::tuple<int, MoeMode, MoePath, Variant>> {};

TEST_P(MoeFfnCudaVariantTest, MatchesCpuAndRepeatsBitwise) {
  const auto [n_tokens, mode, path, variant] = GetParam();
  check_against_cpu(LayerSize{256, 128, 16, 4}, n_tokens, Routing::kScore, mode, path, variant);
}

INSTANTIATE_TEST_SUITE_P(
    Variants, MoeFfnCudaVariantTest,
    ::testing::Combine(::testing::Values(1, 7, 300),
                       ::testing::Values(MoeMode::kW4A16, MoeMode::kW4A4),
                       ::testing::Values(MoePath::kFused, MoePath::kGrouped),
                       ::testing::Values(Variant::kRoutedOnly, Variant::kStaticScales,
                                         Variant::kRoutedInHostMemory, Variant::kTouchedCopies)));

// A layer with more fused work units than an H200 has SMs (T = 8: ~40 groups × 16 units per
// layer), so every block streams several units through its weight ring; T = 8 is also the last
// size of the small router, 64 the first chunked one of the general router.
class MoeFfnCudaManyUnitsTest : public ::testing::TestWithParam<std::tuple<int, MoeMode>> {};

TEST_P(MoeFfnCudaManyUnitsTest, FusedMatchesCpuAndRepeatsBitwise) {
  const auto [n_tokens, mode] = GetParam();
  check_against_cpu(LayerSize{1024, 512, 64, 6}, n_tokens, Routing::kScore, mode, MoePath::kFused);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MoeFfnCudaManyUnitsTest,
                         ::testing::Combine(::testing::Values(1, 8, 64),
                                            ::testing::Values(MoeMode::kW4A16, MoeMode::kW4A4)));

// From kRouterWideTileTokens tokens the router's logits run in 128 × 128 tiles: T = 1100 is not
// a multiple of them and E = 160 needs a second, partly empty, expert tile.
class MoeFfnCudaWideRouterTest : public ::testing::TestWithParam<Routing> {};

TEST_P(MoeFfnCudaWideRouterTest, GroupedMatchesCpuAndRepeatsBitwise) {
  static_assert(cuda::moe::kRouterWideTileTokens <= 1100);
  check_against_cpu(LayerSize{256, 128, 160, 4}, 1100, GetParam(), MoeMode::kW4A16,
                    MoePath::kGrouped);
}

INSTANTIATE_TEST_SUITE_P(Routings, MoeFfnCudaWideRouterTest,
                         ::testing::Values(Routing::kScore, Routing::kSkewed, Routing::kHash));

// The V4 K sizes the W4A16 decode kernel (expert_stream.cu) has as compile-time constants, on
// which it reads block scales from the warp's shared-memory slab and, at one token chunk, a
// pass's activation rows from shared memory when they fit: D = F = 2048 at one, two and four
// token chunks per pass (T = 1, 20, 70; 70 also takes several passes for the shared expert), and
// V4-Flash's D = 4096, F = 2048 at T = 1 (also the one-token early start: the down kernel reads
// the routing and starts its weights before gate-up has finished), 3 (activation rows in shared
// memory: ≤ 4 of 4096), 6 and 8 (gate-up reads them from global memory, down from shared
// memory), skewed so that some experts get several rows; the layers above run its generic-K
// loop. V4-Flash's shape also with its routed experts in host memory (the slab's and the
// activation rows' copies then read PCIe), and with the touched ones copied first (at T = 1 the
// down kernel's early start then reads the copies).
struct V4KCase {
  LayerSize size;
  int n_tokens;
  Routing routing;
  Variant variant = Variant::kSharedExpert;
};

class MoeFfnCudaV4KTest : public ::testing::TestWithParam<V4KCase> {};

TEST_P(MoeFfnCudaV4KTest, FusedMatchesCpuAndRepeatsBitwise) {
  const V4KCase& c = GetParam();
  check_against_cpu(c.size, c.n_tokens, c.routing, MoeMode::kW4A16, MoePath::kFused, c.variant);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MoeFfnCudaV4KTest,
    ::testing::Values(V4KCase{{2048, 2048, 8, 2}, 1, Routing::kScore},
                      V4KCase{{2048, 2048, 8, 2}, 20, Routing::kScore},
                      V4KCase{{2048, 2048, 8, 2}, 70, Routing::kScore},
                      V4KCase{{4096, 2048, 8, 2}, 1, Routing::kScore},
                      V4KCase{{4096, 2048, 8, 2}, 3, Routing::kSkewed},
                      V4KCase{{4096, 2048, 8, 2}, 6, Routing::kSkewed},
                      V4KCase{{4096, 2048, 8, 2}, 8, Routing::kSkewed},
                      V4KCase{{4096, 2048, 8, 2}, 1, Routing::kScore, Variant::kRoutedInHostMemory},
                      V4KCase{
                          {4096, 2048, 8, 2}, 8, Routing::kSkewed, Variant::kRoutedInHostMemory},
                      V4KCase{{4096, 2048, 8, 2}, 1, Routing::kScore, Variant::kTouchedCopies},
                      V4KCase{{4096, 2048, 8, 2}, 8, Routing::kSkewed, Variant::kTouchedCopies}));

}  // namespace
}  // namespace dsv4::kernels

// The GPU expert-parallel MoE (label multigpu: needs 2+ GPUs with peer access; never run in CI)
// against the single-GPU MoE block on all tokens (cuda::moe::moe_ffn_on_path, grouped path: the
// same grouped NVFP4 GEMMs the EP owners run) bit for bit, against the NCCL baseline, and
// against the CPU moe_ffn within the W4A4 tolerance. Routing: score, skewed (ranks with no rows),
// one expert in every token; token splits with empty ranks. Plus a dead peer under the watchdog.
//
// Dimension letters: T tokens (all ranks), D model width.
#include "kernels/ep/cuda/ep_moe_cuda.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "kernels/cuda/moe/moe_pipeline.h"
#include "kernels/ep/ep_fixture.h"
#include "testing/compare.h"
#include "testing/tolerance.h"

namespace dsv4::kernels::ep::cuda {
namespace {

using namespace std::chrono_literals;

Tensor to_device(const TensorView& host) {
  Tensor t = Tensor::empty(host.dtype, host.shape, Device::kCuda).value();
  DSV4_CHECK(copy_tensor(t.view(), host).ok(), "copy to device failed");
  return t;
}

// One GPU's copy of the layer: router and shared expert whole, routed experts [first, +count).
struct DeviceWeights {
  std::vector<Tensor> tensors;
  MoeWeightsView view;

  TensorView up(const TensorView& host) {
    if (host.data == nullptr) return TensorView{};
    tensors.push_back(to_device(host));
    return tensors.back().view();
  }
  format::Nvfp4View up(const format::Nvfp4View& v, int64_t first, int64_t count) {
    return format::Nvfp4View{up(v.packed.rows(first, first + count)),
                             up(v.block_scale.rows(first, first + count)),
                             up(v.global_scale.rows(first, first + count)), v.scale_layout};
  }
  DeviceWeights(const MoeWeightsView& w, int64_t first, int64_t count) {
    tensors.reserve(16);
    view = MoeWeightsView{up(w.gate),
                          up(w.bias),
                          up(w.tid2eid),
                          up(w.w13, first, count),
                          up(w.w2, first, count),
                          up(w.shared_w13, 0, 1),
                          up(w.shared_w2, 0, 1)};
  }
};

std::vector<float> download(const TensorView& dev) {
  std::vector<float> host(static_cast<size_t>(dev.numel()));
  DSV4_CHECK(
      copy_tensor(TensorView::contiguous(host.data(), DType::kF32, Device::kCpu, dev.shape), dev)
          .ok(),
      "copy to host failed");
  return host;
}

// The single-GPU MoE on GPU 0, all tokens, grouped path.
std::vector<float> single_gpu(const MoeLayer& layer) {
  use_gpu(0);
  const int64_t t = layer.n_tokens(), e = layer.weights().w13.n_matrices();
  DeviceWeights w(layer.weights(), 0, e);
  const Tensor x = to_device(layer.x(0, t)), ids = to_device(layer.token_ids(0, t));
  Tensor y = Tensor::empty(DType::kF32, x.shape(), Device::kCuda).value();
  const int64_t bytes = moe_ffn_workspace_bytes(t, w.view, layer.config());
  Tensor ws = Tensor::empty(DType::kU8, {bytes}, Device::kCuda).value();
  const Status s =
      kernels::cuda::moe::moe_ffn_on_path(x.view(), ids.view(), w.view, layer.config(), ws.view(),
                                          y.view(), kernels::cuda::moe::MoePath::kGrouped);
  DSV4_CHECK(s.ok(), "single-GPU moe_ffn: %s", s.to_string().c_str());
  return download(y.view());
}

struct EpRun {
  std::vector<Status> status;
  std::vector<float> y;  // [T, D], rank slices in order
};

// Ranks [0, n_ranks) on their GPUs; rank `dead` (if ≥ 0) never calls forward.
EpRun run_ep(const MoeLayer& layer, int n_ranks, const std::vector<int64_t>& offsets,
             Transport transport, int dead = -1) {
  const int64_t d = layer.weights().w13.n_cols();
  const ExpertSharding sharding =
      ExpertSharding::create(layer.weights().w13.n_matrices(), n_ranks).value();
  int64_t max_tokens = 1;
  for (int r = 0; r < n_ranks; ++r) max_tokens = std::max(max_tokens, offsets[r + 1] - offsets[r]);
  const SymmetricLayout layout =
      SymmetricLayout::create(max_tokens, d, layer.config().n_expert_used, n_ranks).value();
  std::unique_ptr<DeviceRankGroup> group = DeviceRankGroup::create(layout, 2000ms).value();
  std::unique_ptr<NcclGroup> nccl;
  if (transport == Transport::kNccl) nccl = NcclGroup::create(n_ranks).value();
  EpRun run{std::vector<Status>(n_ranks),
            std::vector<float>(static_cast<size_t>(layer.n_tokens() * d),
                               std::numeric_limits<float>::quiet_NaN())};
  std::vector<std::thread> threads;
  for (int r = 0; r < n_ranks; ++r) {
    threads.emplace_back([&, r] {
      if (r == dead) return;
      use_gpu(r);
      const int64_t begin = offsets[r], end = offsets[r + 1];
      DeviceWeights w(layer.weights(), sharding.first_expert(r), sharding.n_local_experts(r));
      Result<std::unique_ptr<EpMoeRank>> rank =
          EpMoeRank::create(*group, nccl.get(), r, sharding, w.view, layer.config(), transport);
      if (!rank.ok()) {
        run.status[r] = rank.status();
        return;
      }
      const Tensor x = to_device(layer.x(begin, end));
      const Tensor ids = to_device(layer.token_ids(begin, end));
      Tensor y = Tensor::empty(DType::kF32, x.shape(), Device::kCuda).value();
      run.status[r] = (*rank)->forward(EpMoeCudaIo{x.view(), ids.view(), y.view()});
      if (run.status[r].ok() && end > begin) {
        const std::vector<float> host = download(y.view());
        std::copy(host.begin(), host.end(), run.y.begin() + begin * d);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return run;
}

int count_mismatches(const std::vector<float>& a, const std::vector<float>& b) {
  int n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return n;
}

std::vector<int64_t> split(int64_t n_tokens, int n_ranks, bool empty_ranks) {
  std::vector<int64_t> offsets{0};
  for (int r = 0; r < n_ranks; ++r) {
    const bool holds = !empty_ranks || r % 2 == 1;
    const int holders = empty_ranks ? n_ranks / 2 : n_ranks;
    offsets.push_back(offsets.back() + (holds ? n_tokens / holders : 0));
  }
  offsets.back() = n_tokens;
  return offsets;
}

using Case = std::tuple<int, Routing, bool>;

class EpMoeCudaTest : public ::testing::TestWithParam<Case> {};

TEST_P(EpMoeCudaTest, BitwiseEqualToSingleGpu) {
  const auto [n_ranks, routing, empty_ranks] = GetParam();
  if (visible_gpus() < n_ranks) GTEST_SKIP() << n_ranks << " GPUs needed";
  testing::SeededRng rng;
  const MoeLayer layer(rng, LayerShape{256, 128, 16, 4, 50}, 24 * n_ranks + 5, routing);
  const std::vector<int64_t> offsets = split(layer.n_tokens(), n_ranks, empty_ranks);
  const std::vector<float> reference = single_gpu(layer);
  const EpRun peer = run_ep(layer, n_ranks, offsets, Transport::kPeer);
  const EpRun nccl = run_ep(layer, n_ranks, offsets, Transport::kNccl);
  for (int r = 0; r < n_ranks; ++r) {
    ASSERT_TRUE(peer.status[r].ok()) << "rank " << r << ": " << peer.status[r].to_string();
    ASSERT_TRUE(nccl.status[r].ok()) << "rank " << r << ": " << nccl.status[r].to_string();
  }
  EXPECT_EQ(count_mismatches(peer.y, reference), 0) << "of " << reference.size();
  EXPECT_EQ(count_mismatches(peer.y, nccl.y), 0) << "of " << reference.size();
  const int64_t d = layer.weights().w13.n_cols();
  EXPECT_LT(testing::max_row_rel_error(peer.y.data(), layer.moe_ffn_out().data_as<float>(),
                                       layer.n_tokens(), d),
            testing::kMoeW4A4RelTol);
}

INSTANTIATE_TEST_SUITE_P(Ranks, EpMoeCudaTest,
                         ::testing::Combine(::testing::Values(2, 4, 8),
                                            ::testing::Values(Routing::kScore, Routing::kSkewed,
                                                              Routing::kOneExpert),
                                            ::testing::Bool()));

TEST(EpMoeCudaWatchdog, DeadPeerTimesOutNamingIt) {
  if (visible_gpus() < 2) GTEST_SKIP() << "2 GPUs needed";
  testing::SeededRng rng;
  const MoeLayer layer(rng, LayerShape{256, 128, 16, 4, 50}, 16, Routing::kScore);
  const EpRun run = run_ep(layer, 2, {0, 8, 16}, Transport::kPeer, /*dead=*/1);
  const Status& s = run.status[0];
  EXPECT_EQ(s.code(), StatusCode::kInternal) << s.to_string();
  EXPECT_NE(s.message().find("phase input-scale for rank(s) 1"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace dsv4::kernels::ep::cuda

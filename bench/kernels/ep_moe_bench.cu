// The expert-parallel MoE block (kernels/ep/cuda) on 2, 4 and 8 GPUs at the V4-Flash shape
// (D 4096, F 2048, 256 routed experts + 1 shared, top-6), tokens per rank ∈ {1, 8, 128, 512,
// 4096}: µs per layer (the slowest rank, median of 20) over peer-mapped symmetric buffers and
// over the NCCL all-gather / reduce-scatter baseline, next to the published 8×H200 anchors
// (../shared/docs/moe_ep.md §0.2, NVFP4-W4A8 fused mega-MoE). Before timing, each point checks
// that both transports give the same bits.
//
// Weights and inputs are synthetic (hash-generated on each GPU): timing does not depend on the
// values, and the bitwise check compares the two transports, not a reference.
// Needs libnccl.so.2 at run time (docs/ep.md has the command).
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "base/buffer.h"
#include "kernels/ep/cuda/ep_moe_cuda.h"

namespace dsv4::kernels::ep::cuda {
namespace {

constexpr int64_t kDim = 4096, kFfn = 2048, kExperts = 256, kTopK = 6, kMaxTokens = 4096;
constexpr int kIterations = 20, kWarmup = 3;

__device__ uint32_t mix(uint64_t i, uint32_t seed) {
  uint64_t x = i * 0x9E3779B97F4A7C15ull + seed;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return static_cast<uint32_t>(x ^ (x >> 29));
}

// Bytes of `kind`: 0 any byte (E2M1 codes), 1 UE4M3 scales in [0.5, 2), 2 floats in [-1, 1)·v,
// 3 floats equal to v.
__global__ void fill_kernel(void* out, int64_t n, int kind, float v, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint32_t h = mix(i, seed);
    if (kind == 0) static_cast<uint8_t*>(out)[i] = static_cast<uint8_t>(h);
    if (kind == 1) static_cast<uint8_t*>(out)[i] = static_cast<uint8_t>(0x30 + (h & 0xF));
    if (kind == 2)
      static_cast<float*>(out)[i] = v * (static_cast<float>(h >> 8) / 8388608.0f - 1.0f);
    if (kind == 3) static_cast<float*>(out)[i] = v;
  }
}

Tensor filled(DType dtype, Shape shape, int kind, float v, uint32_t seed) {
  Tensor t = Tensor::empty(dtype, shape, Device::kCuda).value();
  const int64_t n = kind >= 2 ? t.numel() : static_cast<int64_t>(t.view().bytes());
  fill_kernel<<<1024, 256>>>(t.view().data, n, kind, v, seed);
  return t;
}

struct Nvfp4Stack {
  Tensor packed, scale, global;
  Nvfp4Stack(int64_t g, int64_t n, int64_t k, uint32_t seed)
      : packed(filled(DType::kU8, {g, n, k / 2}, 0, 0, seed)),
        scale(filled(DType::kU8, {g, n, k / 16}, 1, 0, seed + 1)),
        global(filled(DType::kF32, {g}, 3, 1e-3f, seed + 2)) {}
  format::Nvfp4View view() const {
    return format::Nvfp4View{packed.view(), scale.view(), global.view()};
  }
};

// One rank's layer: its 256/R experts, the router and the shared expert, inputs for T tokens.
struct RankLayer {
  Nvfp4Stack w13, w2, shared_w13, shared_w2;
  Tensor gate, bias, x, y;
  MoeWeightsView view;
  RankLayer(int rank, int64_t n_local)
      : w13(n_local, 2 * kFfn, kDim, 100 * rank + 1),
        w2(n_local, kDim, kFfn, 100 * rank + 11),
        shared_w13(1, 2 * kFfn, kDim, 7),
        shared_w2(1, kDim, kFfn, 17),
        gate(filled(DType::kF32, {kExperts, kDim}, 2, 0.05f, 23)),
        bias(filled(DType::kF32, {kExperts}, 2, 0.01f, 29)),
        x(filled(DType::kF32, {kMaxTokens, kDim}, 2, 1.0f, 1000 + rank)),
        y(Tensor::empty(DType::kF32, {kMaxTokens, kDim}, Device::kCuda).value()),
        view{gate.view(), bias.view(),       TensorView{},    w13.view(),
             w2.view(),   shared_w13.view(), shared_w2.view()} {}
};

struct Timed {
  double us;
  Status status;
};

// One layer on this rank, every rank starting together; µs until its result is on the host side.
Timed timed_forward(EpMoeRank& ep, const EpMoeCudaIo& io, std::barrier<>& sync) {
  sync.arrive_and_wait();
  const auto t0 = std::chrono::steady_clock::now();
  Status status = ep.forward(io);
  const auto t1 = std::chrono::steady_clock::now();
  return Timed{std::chrono::duration<double, std::micro>(t1 - t0).count(), std::move(status)};
}

// Anchors: 8×H200 NVFP4-W4A8 fused mega-MoE, µs at tokens per rank (moe_ep.md §0.2).
const char* anchor(int n_ranks, int64_t tokens) {
  if (n_ranks != 8) return "-";
  if (tokens == 8) return "197";
  if (tokens == 512) return "368";
  if (tokens == 4096) return "1920";
  return "-";
}

// Copies a rank's output [T, D] to the host.
std::vector<float> to_host(const TensorView& y) {
  std::vector<float> host(static_cast<size_t>(y.numel()));
  DSV4_CHECK(
      copy_tensor(TensorView::contiguous(host.data(), DType::kF32, Device::kCpu, y.shape), y).ok(),
      "copy to host");
  return host;
}

constexpr int64_t kTokensPerRank[] = {1, 8, 128, 512, 4096};
constexpr int kPoints = 5;

// us[point][transport][iteration][rank]: what every rank measured.
using Times = std::vector<std::vector<std::vector<std::vector<double>>>>;

// One point on one rank: the bitwise check of the transports, then the timed iterations.
void run_point(int point, int rank, EpMoeRank& peer, EpMoeRank& base, const EpMoeCudaIo& io,
               std::barrier<>& sync, Times& us, std::atomic<int>& mismatches) {
  const Timed reference = timed_forward(base, io, sync);
  DSV4_CHECK(reference.status.ok(), "rank %d, NCCL baseline: %s", rank,
             reference.status.to_string().c_str());
  const std::vector<float> want = to_host(io.y);
  const Timed checked = timed_forward(peer, io, sync);
  DSV4_CHECK(checked.status.ok(), "rank %d, peer transport: %s", rank,
             checked.status.to_string().c_str());
  const std::vector<float> got = to_host(io.y);
  if (std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) != 0) ++mismatches;
  for (int it = 0; it < kWarmup + kIterations; ++it) {
    EpMoeRank* transports[] = {&peer, &base};
    for (int k = 0; k < 2; ++k) {
      const Timed t = timed_forward(*transports[k], io, sync);
      DSV4_CHECK(t.status.ok(), "rank %d: %s", rank, t.status.to_string().c_str());
      if (it >= kWarmup) us[point][k][it - kWarmup][rank] = t.us;
    }
  }
}

// The median over iterations of the slowest rank's time.
double median_of_max(const std::vector<std::vector<double>>& by_iteration) {
  std::vector<double> worst;
  for (const auto& ranks : by_iteration)
    worst.push_back(*std::max_element(ranks.begin(), ranks.end()));
  std::sort(worst.begin(), worst.end());
  return worst[worst.size() / 2];
}

void bench_ranks(int n_ranks) {
  const ExpertSharding sharding = ExpertSharding::create(kExperts, n_ranks).value();
  const SymmetricLayout layout = SymmetricLayout::create(kMaxTokens, kDim, kTopK, n_ranks).value();
  std::unique_ptr<DeviceRankGroup> group =
      DeviceRankGroup::create(layout, std::chrono::seconds(20)).value();
  std::unique_ptr<NcclGroup> nccl = NcclGroup::create(n_ranks).value();
  const MoeConfig cfg{static_cast<int>(kTopK), 1.5f, 10.0f, MoeMode::kW4A4};
  Times us(kPoints,
           std::vector<std::vector<std::vector<double>>>(
               2, std::vector<std::vector<double>>(kIterations, std::vector<double>(n_ranks))));
  std::vector<std::atomic<int>> mismatches(kPoints);
  std::barrier sync(n_ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < n_ranks; ++r) {
    threads.emplace_back([&, r] {
      use_gpu(r);
      RankLayer layer(r, sharding.n_local_experts(r));
      auto peer =
          EpMoeRank::create(*group, nccl.get(), r, sharding, layer.view, cfg, Transport::kPeer)
              .value();
      auto base =
          EpMoeRank::create(*group, nccl.get(), r, sharding, layer.view, cfg, Transport::kNccl)
              .value();
      for (int i = 0; i < kPoints; ++i) {
        const int64_t t = kTokensPerRank[i];
        const EpMoeCudaIo io{layer.x.view().rows(0, t), TensorView{}, layer.y.view().rows(0, t)};
        run_point(i, r, *peer, *base, io, sync, us, mismatches[i]);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kPoints; ++i) {
    std::printf("%d GPUs  %5lld tok/rank  peer %9.1f us  nccl %9.1f us  anchor %5s us  %s\n",
                n_ranks, (long long)kTokensPerRank[i], median_of_max(us[i][0]),
                median_of_max(us[i][1]), anchor(n_ranks, kTokensPerRank[i]),
                mismatches[i] ? "TRANSPORTS DIFFER" : "transports bitwise equal");
  }
}

}  // namespace
}  // namespace dsv4::kernels::ep::cuda

int main() {
  using namespace dsv4::kernels::ep::cuda;
  const int gpus = visible_gpus();
  std::printf("ep_moe_bench: V4-Flash MoE (D 4096, F 2048, E 256 + 1, K 6), W4A4, %d GPUs\n", gpus);
  for (int n_ranks : {2, 4, 8}) {
    if (n_ranks <= gpus) bench_ranks(n_ranks);
  }
  return 0;
}

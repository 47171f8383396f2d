#include <cuda_runtime.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "kernels/cuda/cuda_check.h"
#include "kernels/ep/cuda/device_group.h"
#include "kernels/ep/expert_sharding.h"

namespace dsv4::kernels::ep::cuda {
namespace {

struct BarrierParams {
  uint32_t* peer_signals[kMaxRanks];  // rank s's signals array (peer-mapped)
  uint32_t* own_signals;
  int rank, n_ranks;
  uint32_t epoch, phase;
  uint64_t timeout_ns;
  BarrierWatch* watch;  // host-mapped
};

// %globaltimer counts wall-clock nanoseconds, unlike clock64, whose rate follows the SM clock
// (345 MHz idle to 1980 MHz busy on the H200), so the timeout means the same time either way.
__device__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One warp; lane s talks to rank s. Release/acquire at system scope order every earlier write
// of this rank (its published rows, its pushes into peers' combine areas) before the signal,
// and every later read after it. Epochs only grow, compared modulo 2^32.
__global__ void barrier_kernel(BarrierParams p) {
  const int lane = threadIdx.x;
  volatile BarrierWatch* watch = p.watch;
  if (watch->timed_out) return;  // the group already failed: do not wait again
  if (lane < p.n_ranks) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p.peer_signals[lane] + p.rank),
                 "r"(p.epoch)
                 : "memory");
  }
  bool arrived = lane >= p.n_ranks;
  const uint64_t start = now_ns();
  while (!arrived) {
    uint32_t seen;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];"
                 : "=r"(seen)
                 : "l"(p.own_signals + lane)
                 : "memory");
    arrived = static_cast<int32_t>(seen - p.epoch) >= 0;
    if (!arrived && now_ns() - start > p.timeout_ns) break;
  }
  const unsigned missing = __ballot_sync(0xffffffffu, !arrived);
  if (missing != 0 && lane == 0) {
    watch->missing_mask = missing;
    watch->phase = p.phase;
    watch->epoch = p.epoch;
    __threadfence_system();
    watch->timed_out = 1;
  }
}

std::string ranks_in(uint32_t mask) {
  std::string s;
  for (int r = 0; r < kMaxRanks; ++r) {
    if ((mask >> r) & 1u) s += (s.empty() ? "" : ", ") + std::to_string(r);
  }
  return s;
}

}  // namespace

int visible_gpus() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

void use_gpu(int rank) { DSV4_CUDA_CHECK(cudaSetDevice(rank)); }

void disable_nvlink_multicast() {
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
}

Result<std::unique_ptr<DeviceRankGroup>> DeviceRankGroup::create(
    const SymmetricLayout& layout, std::chrono::milliseconds timeout) {
  disable_nvlink_multicast();
  int n_devices = 0;
  DSV4_CUDA_CHECK(cudaGetDeviceCount(&n_devices));
  if (n_devices < layout.n_ranks) {
    return unimplemented("ep: " + std::to_string(layout.n_ranks) + " ranks need as many GPUs, " +
                         std::to_string(n_devices) + " visible");
  }
  for (int a = 0; a < layout.n_ranks; ++a) {
    for (int b = 0; b < layout.n_ranks; ++b) {
      int can = 1;
      if (a != b) DSV4_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b));
      if (!can) {
        return unimplemented("ep: GPU " + std::to_string(a) + " cannot access GPU " +
                             std::to_string(b) + " as a peer (no NVLink/P2P path)");
      }
    }
  }
  std::unique_ptr<DeviceRankGroup> g(new DeviceRankGroup(layout, timeout));
  for (int r = 0; r < layout.n_ranks; ++r) {
    DSV4_CUDA_CHECK(cudaSetDevice(r));
    for (int peer = 0; peer < layout.n_ranks; ++peer) {
      if (peer == r) continue;
      const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();  // clears the (non-sticky) "already enabled" error
      } else {
        DSV4_CUDA_CHECK(e);
      }
    }
    void* memory = nullptr;
    if (cudaMalloc(&memory, layout.total_bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return resource_exhausted("ep: symmetric buffer of " + std::to_string(layout.total_bytes) +
                                " bytes on GPU " + std::to_string(r));
    }
    g->memory_.push_back(memory);
    DSV4_CUDA_CHECK(cudaMemset(memory, 0, layout.total_bytes));
    BarrierWatch* watch = nullptr;
    DSV4_CUDA_CHECK(cudaHostAlloc(&watch, sizeof(BarrierWatch), cudaHostAllocMapped));
    *watch = BarrierWatch{};
    g->watch_.push_back(watch);
    g->views_.emplace_back(static_cast<uint8_t*>(memory), g->layout_, Device::kCuda);
  }
  g->epoch_.assign(layout.n_ranks, 0);
  for (int r = 0; r < layout.n_ranks; ++r) {
    DSV4_CUDA_CHECK(cudaSetDevice(r));
    DSV4_CUDA_CHECK(cudaDeviceSynchronize());  // buffers zeroed before any peer signals
  }
  return Result<std::unique_ptr<DeviceRankGroup>>(std::move(g));
}

DeviceRankGroup::~DeviceRankGroup() {
  for (size_t r = 0; r < memory_.size(); ++r) {
    cudaSetDevice(static_cast<int>(r));
    cudaFree(memory_[r]);
    cudaFreeHost(watch_[r]);
  }
}

void DeviceRankGroup::barrier(int rank, EpPhase phase) {
  BarrierParams p{};
  for (int s = 0; s < layout_.n_ranks; ++s) p.peer_signals[s] = views_[s].signals();
  p.own_signals = views_[rank].signals();
  p.rank = rank;
  p.n_ranks = layout_.n_ranks;
  p.epoch = ++epoch_[rank];
  p.phase = static_cast<uint32_t>(phase);
  p.timeout_ns = static_cast<uint64_t>(timeout_.count()) * 1'000'000;
  DSV4_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&p.watch), watch_[rank], 0));
  barrier_kernel<<<1, 32, 0, cudaStreamPerThread>>>(p);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

Status DeviceRankGroup::wait(int rank, const char* what) {
  cudaEvent_t done;
  DSV4_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  DSV4_CUDA_CHECK(cudaEventRecord(done, cudaStreamPerThread));
  // The host deadline covers every barrier of the call timing out in turn, plus slack.
  const auto deadline = std::chrono::steady_clock::now() + 4 * timeout_;
  cudaError_t state;
  while ((state = cudaEventQuery(done)) == cudaErrorNotReady) {
    if (std::chrono::steady_clock::now() > deadline) {
      cudaEventDestroy(done);
      return internal_error("ep watchdog: rank " + std::to_string(rank) + ": " + what +
                            " still running on GPU " + std::to_string(rank) + " after " +
                            std::to_string(4 * timeout_.count()) + " ms (a kernel is stuck)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  cudaEventDestroy(done);
  if (state != cudaSuccess) {
    return internal_error("ep: rank " + std::to_string(rank) + ": " + what + ": " +
                          cudaGetErrorString(state));
  }
  const BarrierWatch w = *watch_[rank];
  if (w.timed_out) {
    return internal_error("ep watchdog: rank " + std::to_string(rank) + " waited " +
                          std::to_string(timeout_.count()) + " ms at phase " +
                          phase_name(static_cast<EpPhase>(w.phase)) + " for rank(s) " +
                          ranks_in(w.missing_mask) + " that never arrived (dead or stalled peer)");
  }
  return ok_status();
}

}  // namespace dsv4::kernels::ep::cuda

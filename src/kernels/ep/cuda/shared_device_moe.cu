#include <cuda_runtime.h>

#include <algorithm>
#include <thread>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"
#include "kernels/ep/cuda/shared_device_moe.h"

namespace dsv4::kernels::ep::cuda {
namespace {

using kernels::cuda::op_stream;

// first[r] = rank r's first expert; first[R] = E.
struct RankRanges {
  int first[kMaxRanks + 1];
  int n_ranks;
};

// Thread r writes rank r's list [E+2] from the permutation's (active [E+2]: groups in order,
// group E last, the count at [E+1]): the routed groups it owns, in order, then group E. The
// expert kernels take the last listed group for the shared expert's: they skip it when the
// weights have none; when they have one, only rank 0 lists it, so it runs once.
__global__ void rank_groups_kernel(const int* active, int n_experts, RankRanges ranges,
                                   bool with_shared, int* groups) {
  const int r = threadIdx.x;
  if (r >= ranges.n_ranks) return;
  int* out = groups + r * (n_experts + 2);
  const int n_active = active[n_experts + 1];
  int n = 0;
  for (int i = 0; i < n_active; ++i) {
    const int g = active[i];
    if (g != n_experts && ranges.first[r] <= g && g < ranges.first[r + 1]) out[n++] = g;
  }
  if (!with_shared || r == 0) out[n++] = n_experts;
  out[n_experts + 1] = n;
}

}  // namespace

Result<SharedDeviceMoe> SharedDeviceMoe::plan(const MoeWeightsView& w, const MoeConfig& cfg,
                                              const ExpertSharding& sharding,
                                              const SharedDeviceIo& io) {
  if (cfg.mode != MoeMode::kW4A4) {
    return unimplemented("ep moe (one GPU): only the W4A4 mode splits the experts over ranks");
  }
  const int64_t n_experts = w.w13.n_matrices();
  DSV4_CHECK(sharding.n_experts() == n_experts && io.groups.dtype == DType::kI32 &&
                 io.groups.shape == Shape({sharding.n_ranks(), n_experts + 2}) &&
                 io.groups.is_contiguous(),
             "ep moe (one GPU): %lld experts over %d ranks, groups %s", (long long)n_experts,
             sharding.n_ranks(), io.groups.shape.to_string().c_str());
  DSV4_ASSIGN_OR_RETURN(
      const kernels::cuda::moe::MoeSteps steps,
      kernels::cuda::moe::MoeSteps::plan(io.x, io.token_ids, w, cfg, io.workspace, io.y,
                                         kernels::cuda::moe::MoePath::kAuto));
  return SharedDeviceMoe(steps, sharding, io.groups);
}

const int* SharedDeviceMoe::groups_of(int rank) const {
  return groups_.data_as<const int>() + rank * (sharding_.n_experts() + 2);
}

int SharedDeviceMoe::slots_of(int rank) const {
  const kernels::cuda::moe::MoeWorkspace& ws = steps_.workspace();
  return static_cast<int>(std::min(sharding_.n_local_experts(rank), ws.n_tokens * ws.k_used) + 1);
}

Status SharedDeviceMoe::front() const {
  DSV4_RETURN_IF_ERROR(steps_.front());
  const kernels::cuda::moe::MoeWorkspace& ws = steps_.workspace();
  if (ws.n_tokens == 0 || !steps_.fused()) return ok_status();
  RankRanges ranges{};
  ranges.n_ranks = sharding_.n_ranks();
  for (int r = 0; r <= ranges.n_ranks; ++r) {
    ranges.first[r] =
        static_cast<int>(r < ranges.n_ranks ? sharding_.first_expert(r) : sharding_.n_experts());
  }
  rank_groups_kernel<<<1, kMaxRanks, 0, op_stream()>>>(
      steps_.active_groups(), static_cast<int>(ws.n_experts), ranges, steps_.weights().has_shared(),
      groups_.data_as<int>());
  DSV4_CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

Status SharedDeviceMoe::gate_up(int rank) const {
  if (steps_.fused()) return steps_.gate_up(groups_of(rank), slots_of(rank));
  return rank == 0 ? steps_.gate_up(nullptr, 0) : ok_status();
}

Status SharedDeviceMoe::stage_hidden() const { return steps_.stage_hidden(); }

Status SharedDeviceMoe::down(int rank) const {
  if (steps_.fused()) return steps_.down(groups_of(rank), slots_of(rank));
  return rank == 0 ? steps_.down(nullptr, 0) : ok_status();
}

Status SharedDeviceMoe::combine(int64_t begin, int64_t end) const {
  return steps_.combine(begin, end);
}

Status fence_stream(std::chrono::milliseconds deadline, const std::string& what) {
  cudaEvent_t done = nullptr;
  DSV4_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  cudaError_t err = cudaEventRecord(done, op_stream());
  const auto until = std::chrono::steady_clock::now() + deadline;
  while (err == cudaSuccess) {
    err = cudaEventQuery(done);
    if (err != cudaErrorNotReady) break;
    err = cudaSuccess;
    if (std::chrono::steady_clock::now() > until) {
      // The event is released once the work it waits for completes (or never, if it hangs).
      DSV4_CUDA_CHECK(cudaEventDestroy(done));
      return internal_error("ep watchdog: " + what + " did not finish on the GPU within " +
                            std::to_string(deadline.count()) + " ms (hung kernel)");
    }
    std::this_thread::yield();
  }
  // A failed kernel's error is sticky and may come back here too: a Status either way.
  const cudaError_t destroyed = cudaEventDestroy(done);
  if (err == cudaSuccess) err = destroyed;
  if (err != cudaSuccess) {
    return internal_error("ep: " + what + " failed on the GPU: " + cudaGetErrorString(err));
  }
  return ok_status();
}

}  // namespace dsv4::kernels::ep::cuda

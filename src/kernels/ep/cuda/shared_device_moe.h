// Expert parallelism with every rank on one GPU (the engine's --ep N on one device, docs/ep.md
// §7). Ranks are host threads sharing the device, so what one rank hands another is plain device
// memory both read: the step's MoE workspace (kernels/cuda/moe/moe_pipeline.h). The phases, in
// order, each launched by the rank(s) named on their own thread's stream:
//
//   front         rank 0   routing, permutation, x staged to NVFP4, every rank's group list
//   gate_up       each     L1 + SwiGLU of the groups of its experts
//   stage_hidden  rank 0   the SwiGLU rows staged to NVFP4
//   down          each     L2 of its groups
//   combine       each     y of the tokens it is the home of
//
// Bits: equal to cuda::moe_ffn on all T tokens (the single-device engine's) by construction.
// Every launch with cross-row state is that op's own launch over the T tokens, issued once by
// rank 0: the router (its logit split count and its small-T kernel depend on T) and both
// stagings (the dynamic global scale is an amax over all rows). The fused expert kernels'
// work unit is one group's m-tiles, summed in a fixed order, so a group's rows get the same bits
// whichever other groups the launch lists. The combine is per token. The grouped path (steps
// above the fused kernels' crossover, gemm/nvfp4/plan.h) plans its GEMMs from the rows and
// groups of the call, so splitting it would change the plan: there rank 0 runs every group and
// the other ranks only meet the barriers.
//
// Synchronisation is the caller's and host-ordered: after each phase a rank waits for its own
// stream (fence_stream, under a deadline), then meets its peers at a host barrier. No kernel
// ever waits for another rank's, so ranks sharing the SMs cannot deadlock the way a device-side
// barrier would (one rank's kernel spinning on every SM while a peer's waits for one).
//
// Plain C++ (no CUDA headers).
//
// Dimension letters: T tokens, D model width, E routed experts, R ranks.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "kernels/cuda/moe/moe_pipeline.h"
#include "kernels/ep/expert_sharding.h"

namespace dsv4::kernels::ep::cuda {

struct SharedDeviceIo {
  TensorView x;          // f32 [T, D] on the device
  TensorView token_ids;  // i64 [T] (hash-routed layers; else empty)
  TensorView y;          // f32 [T, D]
  TensorView workspace;  // u8, cuda::moe_ffn_workspace_bytes(T) at least
  TensorView groups;     // i32 [R, E+2]: each rank's active-group list (front writes it)
};

class SharedDeviceMoe {
 public:
  // Whether a step of `n_tokens` tokens runs each rank's groups on that rank (the fused
  // kernels), or every group on rank 0 (the grouped path), which then reads every expert.
  static bool splits_experts(int64_t n_tokens, const MoeConfig& cfg) {
    namespace moe = kernels::cuda::moe;
    return moe::moe_experts_on(moe::MoePath::kAuto, n_tokens, cfg.mode == MoeMode::kW4A4) !=
           kernels::cuda::sm90::MoeExperts::kGrouped;
  }

  // W4A4 only (the mode expert parallelism moves rows in); everything else as moe_ffn checks.
  static Result<SharedDeviceMoe> plan(const MoeWeightsView& w, const MoeConfig& cfg,
                                      const ExpertSharding& sharding, const SharedDeviceIo& io);

  Status front() const;
  Status gate_up(int rank) const;
  Status stage_hidden() const;
  Status down(int rank) const;
  // y rows [begin, end).
  Status combine(int64_t begin, int64_t end) const;

 private:
  SharedDeviceMoe(const kernels::cuda::moe::MoeSteps& steps, const ExpertSharding& sharding,
                  const TensorView& groups)
      : steps_(steps), sharding_(sharding), groups_(groups) {}
  // The rank's group list and the fused kernels' grid bound for it.
  const int* groups_of(int rank) const;
  int slots_of(int rank) const;

  kernels::cuda::moe::MoeSteps steps_;
  ExpertSharding sharding_;
  TensorView groups_;
};

// Waits until everything the calling thread launched on its stream has finished, polling (never
// a blocking CUDA sync, which a hung kernel would never return from); an error naming `what`
// when it has not finished within `deadline`, or when it failed.
Status fence_stream(std::chrono::milliseconds deadline, const std::string& what);

}  // namespace dsv4::kernels::ep::cuda

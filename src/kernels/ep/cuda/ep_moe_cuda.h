// The expert-parallel MoE block on GPUs: the CPU simulation's algorithm (ep_moe.h) with the
// GPU MoE pipeline's kernels (kernels/cuda/moe: router, permutation, NVFP4 gather, SwiGLU,
// combine) and the NVFP4 GEMMs of ops.h, one host thread per GPU. Two transports move the same
// bytes between the same phases:
//   kPeer  pull/push through the peer-mapped symmetric buffers, device barriers (the product);
//   kNccl  ncclAllGather of every rank's published prefix, ncclReduceScatter of the expert
//          outputs (each row written by one rank, zeros elsewhere, so the sum is exact up to
//          the sign of zero) and ncclAllReduce(max) for the scales: the baseline and the
//          correctness reference of kPeer.
// Never run in this repository's CI (no GPU); docs/ep.md lists what was and was not run.
//
// Dimension letters: T tokens on this rank, D model width, El local experts.
#pragma once

#include <memory>

#include "kernels/ep/cuda/device_group.h"
#include "kernels/ep/cuda/nccl_group.h"
#include "kernels/ep/expert_sharding.h"

namespace dsv4::kernels::ep::cuda {

enum class Transport { kPeer, kNccl };

struct EpMoeCudaIo {
  TensorView x;          // f32 [T, D] on GPU `rank`
  TensorView token_ids;  // i64 [T] (hash-routed layers; else empty)
  TensorView y;          // f32 [T, D]
};

class EpMoeRank {
 public:
  // `w` lives on GPU `rank`: router and shared expert whole, routed w13 / w2 only this rank's
  // sharding slice (El matrices). nccl is needed for Transport::kNccl only. Call from the thread
  // that drives GPU `rank`.
  static Result<std::unique_ptr<EpMoeRank>> create(DeviceRankGroup& group, NcclGroup* nccl,
                                                   int rank, const ExpertSharding& sharding,
                                                   const MoeWeightsView& w, const MoeConfig& cfg,
                                                   Transport transport);
  ~EpMoeRank();

  // One layer: enqueues everything on cudaStreamPerThread and waits under the watchdog (one
  // mid-call wait: the owner needs its received row count on the host to size the GEMMs).
  Status forward(const EpMoeCudaIo& io);

  struct State;  // ep_moe_cuda.cu: the rank's scratch layout

 private:
  explicit EpMoeRank(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

}  // namespace dsv4::kernels::ep::cuda

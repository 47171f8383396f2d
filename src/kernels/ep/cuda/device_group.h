// The GPU expert-parallel group: one process, one host thread per GPU (rank r drives device r),
// one symmetric buffer per rank in device memory. Peers reach each other's buffers through
// cudaDeviceEnablePeerAccess: in one process a peer's cudaMalloc pointer is directly usable over
// NVLink once access is enabled (a multi-process launcher would exchange cudaIpcMemHandle_t
// instead). NVLink multicast (NVLS) is never used: create() sets NCCL_NVLS_ENABLE=0 and
// NVSHMEM_DISABLE_NVLS=1 before anything initialises NCCL.
//
// Synchronisation is a device-side barrier (barrier kernel: each rank writes the barrier's
// epoch into its slot of every peer's `signals`, then spins on its own), so the host never
// blocks between phases. Its watchdog has two halves: the spin gives up after the timeout and
// records the phase and the missing ranks in a host-mapped word; the host waits for a call's
// end by polling a CUDA event until a deadline (never cudaStreamSynchronize), then reads that
// word. A dead or stalled peer so becomes a Status naming the rank and the phase.
//
// Plain C++ (no CUDA headers): tests and benches include it from .cpp files.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/ep/host_rank_group.h"
#include "kernels/ep/symmetric_layout.h"

namespace dsv4::kernels::ep::cuda {

// What a rank's barrier records when its spin times out (host-mapped, written by the device).
struct BarrierWatch {
  uint32_t timed_out;     // 1 once any barrier of this rank gave up
  uint32_t phase;         // the EpPhase it gave up in
  uint32_t missing_mask;  // bit s: rank s never signalled
  uint32_t epoch;         // the barrier's epoch
};

// The number of visible GPUs (0 without a driver), and making GPU `rank` the calling thread's
// current device: what tests and benches need without including CUDA headers.
int visible_gpus();
void use_gpu(int rank);

// Sets NCCL_NVLS_ENABLE=0 and NVSHMEM_DISABLE_NVLS=1 (overwriting): multicast objects are never
// created, whatever the environment says.
void disable_nvlink_multicast();

class DeviceRankGroup {
 public:
  // Needs n_ranks visible GPUs with peer access between every pair; the error names the pair
  // that has none.
  static Result<std::unique_ptr<DeviceRankGroup>> create(const SymmetricLayout& layout,
                                                         std::chrono::milliseconds timeout);
  ~DeviceRankGroup();
  DeviceRankGroup(const DeviceRankGroup&) = delete;
  DeviceRankGroup& operator=(const DeviceRankGroup&) = delete;

  int n_ranks() const { return layout_.n_ranks; }
  const SymmetricLayout& layout() const { return layout_; }
  // Rank r's buffer as device pointers; valid on every rank's GPU.
  const std::vector<RankBuffer>& buffers() const { return views_; }

  // Enqueues the barrier on the calling thread's stream of GPU `rank` (cudaStreamPerThread).
  // Every rank must call the same barriers in the same order.
  void barrier(int rank, EpPhase phase);
  // Waits (event polling, deadline = the timeout) for everything the calling thread enqueued on
  // GPU `rank`, then reports a device-side barrier timeout if one happened.
  Status wait(int rank, const char* what);

 private:
  DeviceRankGroup(const SymmetricLayout& layout, std::chrono::milliseconds timeout)
      : layout_(layout), timeout_(timeout) {}

  SymmetricLayout layout_;
  std::chrono::milliseconds timeout_;
  std::vector<void*> memory_;         // cudaMalloc'd buffer of each rank, on its device
  std::vector<BarrierWatch*> watch_;  // host-mapped, one per rank
  std::vector<uint32_t> epoch_;       // barriers issued per rank (each rank's thread only)
  std::vector<RankBuffer> views_;
};

}  // namespace dsv4::kernels::ep::cuda

// The CPU simulation of an expert-parallel group: one thread per rank, one symmetric buffer per
// rank in host memory that every rank may read and write (as peer-mapped device memory is on
// the GPUs), and a barrier between phases. The barrier carries the watchdog: a rank that waits
// longer than the deadline gets an error naming itself, the phase and the ranks that never
// arrived, and the group is then broken, so every other rank's next barrier fails at once with
// the same cause. A dead or stalled peer therefore ends the call with a Status on every live
// rank, never a hang (moe_ep.md §0.7: watchdogs in every serious EP library).
//
// Dimension letters: R ranks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "base/buffer.h"
#include "kernels/ep/symmetric_layout.h"

namespace dsv4::kernels::ep {

// The synchronisation points of one EP MoE call, in order (docs/ep.md §3).
enum class EpPhase {
  kInputScale,   // every rank's x amax is published
  kDispatch,     // staged rows, routing ids, send lists and slot rows are published
  kHiddenScale,  // every owner's SwiGLU amax is published (all rows have been pulled)
  kCombine,      // every expert output row sits in its home rank's combine area
  // Ranks sharing one GPU (cuda/shared_device_moe.h), between kHiddenScale and kCombine: rank 0
  // has staged every SwiGLU row.
  kHiddenStaged,
};
const char* phase_name(EpPhase phase);

class HostRankGroup {
 public:
  static Result<std::unique_ptr<HostRankGroup>> create(const SymmetricLayout& layout,
                                                       std::chrono::milliseconds timeout);

  int n_ranks() const { return layout_.n_ranks; }
  const SymmetricLayout& layout() const { return layout_; }
  // Rank r's symmetric buffer; any rank may access it between the barriers that order it.
  const std::vector<RankBuffer>& buffers() const { return views_; }

  // Returns once all ranks reached `phase`; an error when the watchdog fires, when a peer
  // arrived at a different phase, or when the group is already broken.
  Status barrier(int rank, EpPhase phase);
  // A rank that failed on its own tells the peers, which stop waiting for it.
  void abort(int rank, const Status& cause);

 private:
  HostRankGroup(const SymmetricLayout& layout, std::chrono::milliseconds timeout)
      : layout_(layout), timeout_(timeout) {}
  Status missing_ranks_error(int rank, EpPhase phase) const;  // with mutex_ held

  SymmetricLayout layout_;
  std::chrono::milliseconds timeout_;
  std::vector<Buffer> storage_;
  std::vector<RankBuffer> views_;

  std::mutex mutex_;
  std::condition_variable arrived_cv_;
  uint64_t generation_ = 0;    // completed barriers
  uint32_t arrived_mask_ = 0;  // ranks waiting in the current one
  EpPhase current_phase_ = EpPhase::kInputScale;
  Status broken_;  // the first failure; OK while the group is healthy
};

}  // namespace dsv4::kernels::ep

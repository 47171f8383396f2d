#include "kernels/ep/host_rank_group.h"

#include <cstring>
#include <string>

namespace dsv4::kernels::ep {

const char* phase_name(EpPhase phase) {
  switch (phase) {
    case EpPhase::kInputScale:
      return "input-scale";
    case EpPhase::kDispatch:
      return "dispatch";
    case EpPhase::kHiddenScale:
      return "hidden-scale";
    case EpPhase::kCombine:
      return "combine";
    case EpPhase::kHiddenStaged:
      return "hidden-staged";
  }
  DSV4_UNREACHABLE("phase %d", static_cast<int>(phase));
}

Result<std::unique_ptr<HostRankGroup>> HostRankGroup::create(const SymmetricLayout& layout,
                                                             std::chrono::milliseconds timeout) {
  std::unique_ptr<HostRankGroup> group(new HostRankGroup(layout, timeout));
  for (int r = 0; r < layout.n_ranks; ++r) {
    Result<Buffer> buffer = Buffer::allocate(layout.total_bytes, Device::kCpu);
    if (!buffer.ok())
      return buffer.status().with_context("symmetric buffer of rank " + std::to_string(r));
    // Zeroed like DeepGEMM's buffer after rendezvous, so a read before its write shows as 0.
    std::memset(buffer->data(), 0, layout.total_bytes);
    group->storage_.push_back(std::move(*buffer));
  }
  for (const Buffer& b : group->storage_) {
    group->views_.emplace_back(static_cast<uint8_t*>(b.data()), group->layout_, Device::kCpu);
  }
  return group;
}

Status HostRankGroup::missing_ranks_error(int rank, EpPhase phase) const {
  std::string missing;
  for (int r = 0; r < layout_.n_ranks; ++r) {
    if (!((arrived_mask_ >> r) & 1u)) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
  }
  return internal_error("ep watchdog: rank " + std::to_string(rank) + " waited " +
                        std::to_string(timeout_.count()) + " ms at phase " + phase_name(phase) +
                        " for rank(s) " + missing + " that never arrived (dead or stalled peer)");
}

Status HostRankGroup::barrier(int rank, EpPhase phase) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!broken_.ok()) return broken_;
  if (arrived_mask_ != 0 && phase != current_phase_) {
    broken_ =
        internal_error("ep: rank " + std::to_string(rank) + " reached phase " + phase_name(phase) +
                       " while its peers wait at " + phase_name(current_phase_));
    arrived_cv_.notify_all();
    return broken_;
  }
  current_phase_ = phase;
  arrived_mask_ |= 1u << rank;
  if (arrived_mask_ == (1u << layout_.n_ranks) - 1) {
    arrived_mask_ = 0;
    ++generation_;
    arrived_cv_.notify_all();
    return ok_status();
  }
  const uint64_t generation = generation_;
  const bool released = arrived_cv_.wait_for(
      lock, timeout_, [&] { return generation_ != generation || !broken_.ok(); });
  if (generation_ != generation) return ok_status();
  if (released) return broken_;  // a peer broke the group while we waited
  broken_ = missing_ranks_error(rank, phase);
  arrived_cv_.notify_all();
  return broken_;
}

void HostRankGroup::abort(int rank, const Status& cause) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (broken_.ok()) {
    broken_ = cause.with_context("ep: peer rank " + std::to_string(rank) + " failed");
  }
  arrived_cv_.notify_all();
}

}  // namespace dsv4::kernels::ep

// Which rank owns which routed experts under expert parallelism (docs/ep.md). Rank r owns the
// contiguous range [first_expert(r), first_expert(r) + n_local_experts(r)), so its weights are
// one slice of the stacked [E, ...] tensors and its grouped-GEMM offsets are a slice of the
// single-rank ones.
//
// E need not be a multiple of R: the first E % R ranks own one expert more. DeepGEMM's mega-MoE
// refuses that case (moe_ep.md §1.1); we handle it because it costs nothing here and keeps odd
// rank counts (3) usable for testing. A rank with no expert at all is refused instead, since it
// would only relay traffic. The leader (rank 0) may own fewer than its share (with_leader): it
// also holds every other weight and the caches, and on a model as large as V4-Pro an even share
// beside them passes its GPU (runtime/ep_memory_plan.h picks the count).
//
// Dimension letters: E routed experts, R ranks.
#pragma once

#include <array>
#include <cstdint>

#include "dsv4/status.h"

namespace dsv4::kernels::ep {

// One host, one NVLink domain: 8 GPUs at most (the H200 boards we target).
inline constexpr int kMaxRanks = 8;

class ExpertSharding {
 public:
  // Refuses n_ranks outside [1, kMaxRanks] and n_ranks > n_experts, naming both numbers.
  static Result<ExpertSharding> create(int64_t n_experts, int n_ranks);
  // Rank 0 owns leader_experts, ranks 1 … R − 1 split the rest as create splits (the first ones
  // one more); the same refusals, and a count that leaves a rank none.
  static Result<ExpertSharding> with_leader(int64_t n_experts, int n_ranks,
                                            int64_t leader_experts);

  int64_t n_experts() const { return n_experts_; }
  int n_ranks() const { return n_ranks_; }
  int64_t first_expert(int rank) const;
  int64_t n_local_experts(int rank) const;
  int owner(int64_t expert) const;

 private:
  ExpertSharding(int64_t n_experts, int n_ranks) : n_experts_(n_experts), n_ranks_(n_ranks) {}
  // Ranks [from, R) split experts [first_[from], E) evenly, the first ones one more.
  void split_from(int from);

  int64_t n_experts_;
  int n_ranks_;
  std::array<int64_t, kMaxRanks + 1> first_{};  // rank r owns [first_[r], first_[r + 1])
};

}  // namespace dsv4::kernels::ep

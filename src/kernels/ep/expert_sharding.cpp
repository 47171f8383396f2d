#include "kernels/ep/expert_sharding.h"

#include <string>

#include "base/check.h"

namespace dsv4::kernels::ep {

Result<ExpertSharding> ExpertSharding::create(int64_t n_experts, int n_ranks) {
  if (n_ranks < 1 || n_ranks > kMaxRanks) {
    return invalid_argument("expert parallelism: " + std::to_string(n_ranks) +
                            " ranks, expected 1 to " + std::to_string(kMaxRanks));
  }
  if (n_experts < n_ranks) {
    return invalid_argument("expert parallelism: " + std::to_string(n_experts) +
                            " routed experts cannot be spread over " + std::to_string(n_ranks) +
                            " ranks (every rank must own at least one)");
  }
  ExpertSharding sharding(n_experts, n_ranks);
  sharding.split_from(0);
  return sharding;
}

Result<ExpertSharding> ExpertSharding::with_leader(int64_t n_experts, int n_ranks,
                                                   int64_t leader_experts) {
  DSV4_ASSIGN_OR_RETURN(ExpertSharding sharding, create(n_experts, n_ranks));
  const int64_t most = n_experts - (n_ranks - 1);  // every other rank keeps one
  if (leader_experts < 1 || leader_experts > most || (n_ranks == 1 && leader_experts != n_experts)) {
    return invalid_argument("expert parallelism: rank 0 cannot own " +
                            std::to_string(leader_experts) + " of " + std::to_string(n_experts) +
                            " routed experts over " + std::to_string(n_ranks) +
                            " ranks (from 1 to " + std::to_string(n_ranks == 1 ? n_experts : most) +
                            ")");
  }
  if (n_ranks == 1) return sharding;  // the one rank owns them all, as create made it
  sharding.first_[1] = leader_experts;
  sharding.split_from(1);
  return sharding;
}

// The first (E − first_[from]) % (R − from) of ranks from … R − 1 own one expert more.
void ExpertSharding::split_from(int from) {
  const int64_t rest = n_experts_ - first_[from], ranks = n_ranks_ - from;
  const int64_t base = rest / ranks, extra = rest % ranks;
  for (int r = from; r < n_ranks_; ++r) {
    first_[r + 1] = first_[r] + base + (r - from < extra ? 1 : 0);
  }
}

int64_t ExpertSharding::first_expert(int rank) const {
  DSV4_CHECK(0 <= rank && rank <= n_ranks_, "rank %d of %d", rank, n_ranks_);
  return first_[rank];
}

int64_t ExpertSharding::n_local_experts(int rank) const {
  return first_expert(rank + 1) - first_expert(rank);
}

int ExpertSharding::owner(int64_t expert) const {
  DSV4_CHECK(0 <= expert && expert < n_experts_, "expert %lld of %lld", (long long)expert,
             (long long)n_experts_);
  int rank = 0;
  while (expert >= first_[rank + 1]) ++rank;
  return rank;
}

}  // namespace dsv4::kernels::ep

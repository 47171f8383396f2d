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
  return ExpertSharding(n_experts, n_ranks);
}

// The first n_experts % n_ranks ranks own base + 1 experts, the others base.
int64_t ExpertSharding::first_expert(int rank) const {
  DSV4_CHECK(0 <= rank && rank <= n_ranks_, "rank %d of %d", rank, n_ranks_);
  const int64_t base = n_experts_ / n_ranks_, extra = n_experts_ % n_ranks_;
  return rank * base + (rank < extra ? rank : extra);
}

int64_t ExpertSharding::n_local_experts(int rank) const {
  return first_expert(rank + 1) - first_expert(rank);
}

int ExpertSharding::owner(int64_t expert) const {
  DSV4_CHECK(0 <= expert && expert < n_experts_, "expert %lld of %lld", (long long)expert,
             (long long)n_experts_);
  const int64_t base = n_experts_ / n_ranks_, extra = n_experts_ % n_ranks_;
  const int64_t big = extra * (base + 1);  // experts held by the ranks with one more
  return static_cast<int>(expert < big ? expert / (base + 1) : extra + (expert - big) / base);
}

}  // namespace dsv4::kernels::ep

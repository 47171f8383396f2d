#include "kernels/ep/dispatch_plan.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"

namespace dsv4::kernels::ep {

DispatchPlan plan_dispatch(const int32_t* ids, int64_t n_tokens, int64_t top_k,
                           const ExpertSharding& sharding) {
  DSV4_CHECK(top_k >= 1 && top_k <= 32, "plan_dispatch: top_k %lld", (long long)top_k);
  const int n_ranks = sharding.n_ranks();
  std::vector<std::vector<TokenSend>> by_dest(n_ranks);
  std::vector<uint32_t> mask(n_ranks);
  for (int64_t t = 0; t < n_tokens; ++t) {
    std::fill(mask.begin(), mask.end(), 0u);
    for (int64_t k = 0; k < top_k; ++k) {
      mask[sharding.owner(ids[t * top_k + k])] |= 1u << k;
    }
    for (int d = 0; d < n_ranks; ++d) {
      if (mask[d] != 0) by_dest[d].push_back(TokenSend{static_cast<int32_t>(t), mask[d]});
    }
  }
  DispatchPlan plan;
  plan.send_offsets.push_back(0);
  for (const auto& sends : by_dest) {
    plan.sends.insert(plan.sends.end(), sends.begin(), sends.end());
    plan.send_offsets.push_back(static_cast<int32_t>(plan.sends.size()));
  }
  return plan;
}

void publish_plan(const DispatchPlan& plan, const int32_t* ids, int64_t n_tokens, int64_t top_k,
                  const RankBuffer& own) {
  const int n_ranks = static_cast<int>(plan.send_offsets.size()) - 1;
  for (int d = 0; d < n_ranks; ++d) {
    const int32_t begin = plan.send_offsets[d], count = plan.send_offsets[d + 1] - begin;
    own.send_count()[d] = count;
    std::memcpy(own.sends(d), plan.sends.data() + begin, sizeof(TokenSend) * count);
  }
  std::memcpy(own.ids(), ids, sizeof(int32_t) * n_tokens * top_k);
}

ReceivePlan plan_receive(int rank, const ExpertSharding& sharding, int64_t top_k,
                         std::span<const RankBuffer> buffers) {
  const int n_ranks = sharding.n_ranks();
  DSV4_CHECK(static_cast<int>(buffers.size()) == n_ranks, "plan_receive: %zu buffers, %d ranks",
             buffers.size(), n_ranks);
  const int64_t first = sharding.first_expert(rank), n_local = sharding.n_local_experts(rank);
  ReceivePlan plan;
  plan.src_offsets.push_back(0);
  plan.group_offsets.assign(n_local + 1, 0);
  // Pass 1: the received rows in (source, token) order, and the size of every local group.
  for (int s = 0; s < n_ranks; ++s) {
    const RankBuffer& peer = buffers[s];
    const int32_t count = peer.send_count()[rank];
    for (int32_t i = 0; i < count; ++i) {
      const TokenSend send = peer.sends(rank)[i];
      plan.recv_token.push_back(send.token);
      for (int64_t k = 0; k < top_k; ++k) {
        if ((send.slot_mask >> k) & 1u) {
          const int64_t e = peer.ids()[send.token * top_k + k] - first;
          DSV4_CHECK(0 <= e && e < n_local, "rank %d received expert %lld it does not own", rank,
                     (long long)(e + first));
          ++plan.group_offsets[e + 1];
        }
      }
    }
    plan.src_offsets.push_back(static_cast<int32_t>(plan.recv_token.size()));
  }
  for (int64_t e = 0; e < n_local; ++e) plan.group_offsets[e + 1] += plan.group_offsets[e];
  // Pass 2: place every (row, slot) in its expert's group; visiting sources, tokens and slots in
  // ascending order keeps each group in global slot order.
  const size_t n_rows = static_cast<size_t>(plan.group_offsets[n_local]);
  plan.row_recv.resize(n_rows);
  plan.row_home.resize(n_rows);
  plan.row_slot.resize(n_rows);
  std::vector<int32_t> next(plan.group_offsets.begin(), plan.group_offsets.end() - 1);
  for (int s = 0; s < n_ranks; ++s) {
    const RankBuffer& peer = buffers[s];
    for (int32_t r = plan.src_offsets[s]; r < plan.src_offsets[s + 1]; ++r) {
      const TokenSend send = peer.sends(rank)[r - plan.src_offsets[s]];
      for (int64_t k = 0; k < top_k; ++k) {
        if (!((send.slot_mask >> k) & 1u)) continue;
        const int32_t row = next[peer.ids()[send.token * top_k + k] - first]++;
        plan.row_recv[row] = r;
        plan.row_home[row] = s;
        plan.row_slot[row] = static_cast<int32_t>(send.token * top_k + k);
      }
    }
  }
  return plan;
}

}  // namespace dsv4::kernels::ep

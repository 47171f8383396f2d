// Who sends what to whom. The sender plans (each token once per destination rank, with the
// slots that rank serves); the owner of a range of experts reads every sender's published plan
// and lays the received rows out grouped by its local experts, ready for the grouped GEMMs.
//
// Row order is the whole bitwise argument (docs/ep.md §2): inside one expert the owner orders
// rows by (source rank, token, slot), which is the global slot order t·K + k over the
// concatenation rank 0's tokens, rank 1's, … — the order moe_group gives the single-rank MoE
// on that concatenation. So each expert's group holds the same rows in the same order on both
// paths, and the grouped GEMM sees identical operands.
//
// Dimension letters: T tokens on a rank, K experts per token, R ranks, El local experts.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/ep/expert_sharding.h"
#include "kernels/ep/symmetric_layout.h"

namespace dsv4::kernels::ep {

struct DispatchPlan {
  std::vector<int32_t> send_offsets;  // [R+1] sends[send_offsets[d], send_offsets[d+1]) go to d
  std::vector<TokenSend> sends;       // by destination, tokens ascending within one
};

// ids i32 [T, K] (host) of this rank's tokens -> what to send where.
DispatchPlan plan_dispatch(const int32_t* ids, int64_t n_tokens, int64_t top_k,
                           const ExpertSharding& sharding);

// Writes the plan and the routing ids into this rank's buffer for its peers to read.
void publish_plan(const DispatchPlan& plan, const int32_t* ids, int64_t n_tokens, int64_t top_k,
                  const RankBuffer& own);

struct ReceivePlan {
  std::vector<int32_t> src_offsets;    // [R+1] received rows by source rank
  std::vector<int32_t> recv_token;     // [Nr]  each received row's token index on its source
  std::vector<int32_t> group_offsets;  // [El+1] grouped rows of each local expert
  std::vector<int32_t> row_recv;       // [Nrows] the received row that feeds grouped row r
  std::vector<int32_t> row_home;       // [Nrows] its home (source) rank
  std::vector<int32_t> row_slot;       // [Nrows] its slot t·K + k on the home rank
};

// Rank `rank` reads the plans its peers published (buffers[s] is rank s's buffer).
ReceivePlan plan_receive(int rank, const ExpertSharding& sharding, int64_t top_k,
                         std::span<const RankBuffer> buffers);

}  // namespace dsv4::kernels::ep

// The data movement of the GPU expert-parallel MoE: the kernels that turn the routing into
// send lists, read peers' published plans into a grouped row layout, pull staged rows, push
// expert outputs home, and agree on the dynamic global scales. They mirror dispatch_plan.cpp
// and ep_moe.cpp of the CPU simulation row for row (same orders, same layouts), so the GPU
// version inherits the simulation's bitwise argument. Launched on cudaStreamPerThread.
//
// "Peers" are RankBuffers: the peer-mapped symmetric buffers, or, for the NCCL baseline, local
// copies of every rank's published prefix (all-gathered).
//
// Dimension letters: T tokens on a rank, K experts per token, R ranks, El local experts,
// Nr received rows (one per source token), Nrows grouped rows, D model width.
#pragma once

#include <cstdint>

#include "kernels/ep/expert_sharding.h"
#include "kernels/ep/symmetric_layout.h"

namespace dsv4::kernels::ep::cuda {

struct PeerSet {
  RankBuffer* peers;  // host array of R views
  int n_ranks;
};

// own.sends / send_count / ids / slot_row from the router's output of this rank:
// sel_expert i32 [T, K+1] (slot K: the shared expert), row_of i32 [T, K+1] (kernels/cuda/moe).
void launch_publish_plan(const int32_t* sel_expert, const int32_t* row_of, int n_tokens, int top_k,
                         const ExpertSharding& sharding, const RankBuffer& own);

// The receive plan of rank `rank` (dispatch_plan.h's ReceivePlan, on the device):
// recv_token [R·Tmax], src_offsets [R+1], group_offsets [El+1], row_recv / row_home /
// row_slot [R·Tmax·K]; totals (host-mapped) gets {Nr, Nrows}.
struct ReceiveTables {
  int32_t* recv_token;
  int32_t* src_offsets;
  int32_t* group_offsets;
  int32_t* row_recv;
  int32_t* row_home;
  int32_t* row_slot;
  int32_t* totals;
};
void launch_receive_plan(const PeerSet& peers, int rank, int top_k, const ExpertSharding& sharding,
                         const ReceiveTables& out);

// recv rows [Nr] <- the staged rows the peers published (packed D/2 and scale D/16 bytes).
void launch_pull_rows(const PeerSet& peers, const ReceiveTables& plan, int n_recv, int64_t dim,
                      uint8_t* recv_packed, uint8_t* recv_scale);

// Expert output row r [Nrows, D] -> combine row slot_row[home][row_slot[r]] of combine[home],
// where combine[s] / slot_row[s] are rank s's combine area and slot-row table.
void launch_push_rows(float* const* combine, const int32_t* const* slot_row, int n_ranks,
                      const ReceiveTables& plan, int n_rows, int64_t dim, const float* out);

// combine[row_of[t, K]] = shared_down[t]: the shared expert's row where launch_combine reads it.
void launch_place_shared(const float* shared_down, const int32_t* row_of, int n_tokens, int top_k,
                         int64_t dim, float* combine);

// *word = max(*word, max |x| over n floats): zero the word once, then fold in several tensors.
void launch_amax(const float* x, int64_t n, float* word);

// decode[0] = GlobalScale::from_amax(max over the peers' scales[word]).decode.
void launch_agree_decode(const PeerSet& peers, int word, float* decode);

}  // namespace dsv4::kernels::ep::cuda

// The expert-parallel MoE block on the CPU simulation: every rank (a thread) calls
// ep_moe_forward on its own tokens; rank r runs the routed experts sharding.first_expert(r) …
// for every rank's tokens and returns their outputs to the tokens' home ranks; each rank runs
// the router and the shared expert (when `w` has one in NVFP4) on its own tokens. The result on each rank is bitwise equal
// to kernels::moe_ffn (W4A4) on the concatenation of all ranks' tokens, rank 0 first
// (docs/ep.md §2 gives the argument and its conditions).
//
// Phases, each ending at a HostRankGroup barrier:
//   input-scale   route; publish amax(x); agree on max over ranks
//   dispatch      stage x into the own symmetric buffer; publish ids, send lists, slot rows
//                 then: pull the rows sent here, group them, L1 + SwiGLU; the shared expert's L1
//   hidden-scale  publish max(amax(routed SwiGLU rows here), amax(shared SwiGLU rows)); agree
//                 then: L2 for both; push each routed row into its home's combine area
//   combine       moe_combine over the own area, + the shared expert
//
// Dimension letters: T tokens on this rank, K experts per token, D model width.
#pragma once

#include "kernels/ep/expert_sharding.h"
#include "kernels/ep/host_rank_group.h"

namespace dsv4::kernels::ep {

struct EpMoeIo {
  TensorView x;          // f32 [T, D] this rank's tokens (ffn-normed), contiguous
  TensorView token_ids;  // i64 [T] their token ids (hash-routed layers; else empty)
  TensorView y;          // f32 [T, D] routed + shared
};

// Runs rank `rank`'s part of one MoE block. `w` holds the router, all E routed experts and the
// shared expert (or none: y is then the routed sum, moe_ffn's contract); the rank touches only
// its slice of the routed ones. Calibrated input scales in `w` replace the agreed dynamic ones. Only MoeMode::kW4A4 moves
// NVFP4 rows; kW4A16 is refused (unimplemented). On any error the rank aborts the group, so its
// peers fail fast instead of waiting for the watchdog.
Status ep_moe_forward(HostRankGroup& group, int rank, const ExpertSharding& sharding,
                      const MoeWeightsView& w, const MoeConfig& cfg, const EpMoeIo& io);

}  // namespace dsv4::kernels::ep

// Which rank holds what under expert parallelism over --gpus N (expert_parallel.h), from a config
// alone, so it prints before anything loads (`dsv4 check --plan --gpus N`) and the engine
// refuses a plan that does not fit its GPUs before it loads a byte (check_ep_fits); then from
// the checkpoint as bound (checkpoint::LoadPlan, before a tensor is decoded), whose bytes may
// exceed what its config declares (check_bound_ep_fits). The loader stages each main layer's
// NVFP4 routed experts in pinned host memory as it loads that layer (placement.h), each rank
// copies its contiguous shard of them (kernels/ep/expert_sharding.h) to its GPU
// (expert_shards.h), and the host copy is freed before the next layer is decoded: the host
// holds one layer's experts at a time, and nothing once loaded. The leader (rank 0) holds
// every other weight (attention, the shared experts, routers, embeddings, the head, the MTP
// block with its experts), the caches, and room to gather one layer's routed experts whole: a
// step above the fused expert kernels' range runs every expert on rank 0 (expert_parallel.h).
// The ranks' barriers are on the host, so no rank holds an EP buffer. Values count as
// LoadPlan::min_device_bytes does: a non-expert value at least a bf16, except the linears kept
// in FP8, a byte a value and their block scales, as a GPU keeps them: the config's plan counts
// so the linears the release stores in FP8 where the config declares them
// (ModelConfig::fp8_linears), the bound plan the linears the checkpoint stores in FP8.
//
// Dimension letters: R ranks, E routed experts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/config.h"
#include "checkpoint/loader.h"
#include "dsv4/status.h"

namespace dsv4::runtime {

struct RankBytes {
  int64_t first_expert = 0, n_experts = 0;  // its shard of each layer's E experts
  int64_t experts = 0;                      // those experts' NVFP4 stacks, all layers
  int64_t other_weights = 0;                // rank 0 only
  int64_t layer_copy = 0;  // rank 0 of several: one layer's routed codes and block scales
  int64_t total() const { return experts + other_weights + layer_copy; }
};

struct EpMemoryPlan {
  std::vector<RankBytes> ranks;     // R
  int64_t routed_expert_bytes = 0;  // every main layer's NVFP4 stacks
  int64_t other_weight_bytes = 0;
  // The most pinned host memory the loading holds at once (R > 1): one main layer's stacks'
  // codes and block scales, the largest layer's, since each layer's are freed once the ranks
  // have copied them, before the next is decoded; and what stays there once loaded: nothing
  // (docs/ep.md §7).
  int64_t host_bytes = 0;
  int64_t host_bytes_kept = 0;
  int64_t largest_layer = 0;  // R > 1: one main layer's routed codes and block scales, rank 0's copy
};

// R in 1..8 and R ≤ E, else invalid_argument naming both. One rank is the single-GPU engine:
// every weight on the GPU, nothing in host memory, no layer copy. The experts split evenly.
Result<EpMemoryPlan> plan_ep_memory(const checkpoint::ModelConfig& config, int n_ranks);

// The same plan from what the checkpoint as bound holds (`bound`: a GPU load's, FP8 linears kept
// FP8), each layer's `n_experts` split over `n_ranks`: the main layers' NVFP4 stacks
// (LoadPlan::expert_packed_bytes, their codes and block scales expert_bulk_bytes) are sharded;
// everything else is rank 0's at LoadPlan::min_device_bytes' count, the MTP blocks' experts
// (past LoadPlan::n_layer) and any routed experts decoded dense with it. Where the checkpoint
// stores what its config declares, it equals plan_ep_memory(config, n_ranks).
Result<EpMemoryPlan> plan_ep_memory(const checkpoint::LoadPlan& bound, int64_t n_experts,
                                    int n_ranks);

// The plan with rank 0 owning `leader_experts` of each layer's experts and the other ranks an
// even split of the rest (kernels/ep/expert_sharding.h with_leader, whose refusals it returns).
Result<EpMemoryPlan> with_leader_experts(const EpMemoryPlan& plan, int64_t leader_experts);

// Rank 0's experts of each layer for a plan of R > 1 ranks: its even share where that fits
// `rank0_free` with `headroom` beside every other weight and the layer copy, else the most that
// do (at least 1, at most the share): the leader sheds experts to the others rather than the
// model not loading. An even split keeps the ranks' expert work even, so it stays where it fits.
// Whether the others then fit is check_ep_fits'.
int64_t leader_experts_to_fit(const EpMemoryPlan& plan, int64_t rank0_free, int64_t headroom);

// What rank `rank`'s GPU must hold: its share of the plan, and for rank 0 `headroom` besides
// (the caches and a step's scratch).
int64_t rank_device_bytes(const EpMemoryPlan& plan, int rank, int64_t headroom);

// The plan against the GPUs it would run on, one a rank: rank r on GPU devices[r], which has
// free_bytes[r] free. resource_exhausted names the first rank that does not fit, its GPU, the
// bytes it needs and those free.
Status check_ep_fits(const EpMemoryPlan& plan, const std::vector<int>& devices,
                     const std::vector<int64_t>& free_bytes, int64_t headroom);

// check_ep_fits for the bound plan (`bound`), laid with the leader's experts chosen before
// loading as `declared`, the config's plan, was. Its refusal says it is the checkpoint as bound
// that does not fit, that the split chosen from the config (rank 0's experts) does not hold, and,
// where the refused rank needs more than `declared` gave it, that the checkpoint stores more
// than its config declares, by how many bytes and in which part.
Status check_bound_ep_fits(const EpMemoryPlan& bound, const EpMemoryPlan& declared,
                           const std::vector<int>& devices, const std::vector<int64_t>& free_bytes,
                           int64_t headroom);

// A GPU kind the plan is laid against, with the memory nvidia-smi reports for it.
struct GpuKind {
  const char* name;
  int64_t bytes;
};
inline constexpr GpuKind kPlanGpus[] = {{"H100 80GB", int64_t{81559} << 20},
                                        {"H200 141GB", int64_t{143771} << 20}};

// The plan as a table (one row per rank), then per GpuKind whether every rank fits with
// `headroom` (caches and a step's scratch) left on rank 0: evenly, or with rank 0 owning fewer
// experts (leader_experts_to_fit), which the line then names.
std::string describe(const EpMemoryPlan& plan, int64_t headroom);

}  // namespace dsv4::runtime

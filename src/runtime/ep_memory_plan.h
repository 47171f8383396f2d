// Which rank holds what under expert parallelism (expert_parallel.h), from a config alone, so it
// prints before anything loads (`dsv4 check --plan --gpus N`). The leader (rank 0) holds every
// weight but the main layers' routed experts (attention, the shared experts, routers,
// embeddings, the head, the MTP block) and the caches; each rank holds its contiguous shard of
// every layer's NVFP4 routed experts (kernels/ep/expert_sharding.h) and its symmetric buffer.
// Values count as LoadPlan::min_device_bytes does: a non-expert value at least a bf16.
//
// Dimension letters: R ranks, E routed experts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/config.h"
#include "dsv4/status.h"

namespace dsv4::runtime {

struct RankBytes {
  int64_t first_expert = 0, n_experts = 0;  // its shard of each layer's E experts
  int64_t experts = 0;                      // those experts' NVFP4 stacks, all layers
  int64_t other_weights = 0;                // rank 0 only
  int64_t symmetric = 0;                    // the EP symmetric buffer
  int64_t total() const { return experts + other_weights + symmetric; }
};

struct EpMemoryPlan {
  std::vector<RankBytes> ranks;     // R
  int64_t routed_expert_bytes = 0;  // every main layer's NVFP4 stacks
  int64_t other_weight_bytes = 0;
};

// R in 1..8 and R ≤ E, else invalid_argument naming both; max_step_tokens sizes the buffers.
Result<EpMemoryPlan> plan_ep_memory(const checkpoint::ModelConfig& config, int n_ranks,
                                    int64_t max_step_tokens);

// A GPU kind the plan is laid against, with the memory nvidia-smi reports for it.
struct GpuKind {
  const char* name;
  int64_t bytes;
};
inline constexpr GpuKind kPlanGpus[] = {{"H100 80GB", int64_t{81559} << 20},
                                        {"H200 141GB", int64_t{143771} << 20}};

// The plan as a table (one row per rank), then per GpuKind whether every rank fits with
// `headroom` (caches and a step's scratch) left on rank 0.
std::string describe(const EpMemoryPlan& plan, int64_t headroom);

}  // namespace dsv4::runtime

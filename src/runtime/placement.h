// Which placement (model/expert_placement.h) an engine's options ask for, and the checks that
// refuse the impossible ones before anything loads: expert parallelism (expert_parallel.h)
// over EngineOptions::expert_parallel ranks, else the single-device placement with expert offload
// (offloaded_experts.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "checkpoint/to_device.h"
#include "checkpoint/weights.h"
#include "dsv4/engine.h"
#include "model/expert_placement.h"
#include "runtime/expert_shards.h"
#include "runtime/step_memory_plan.h"

namespace dsv4::runtime {

// Device memory the weights leave free besides the prefix cache when expert offload (or the EP
// memory plan) decides what fits: a margin for the sequences' caches and a step's activations
// and MoE workspace, which grow with the requests and are allocated as they come, so no config
// gives them exactly. A step whose plan (step_memory_plan.h) is larger gets its plan instead.
inline constexpr int64_t kStepHeadroomBytes = int64_t{4} << 30;

// The rank and GPU counts and what they need, from the options alone: a --gpus beyond the
// devices present names those present; --gpus N needs --ep N, --device cuda, expert offload
// left at auto, and peer access from every GPU to GPU 0.
Status check_parallelism(const EngineOptions& options);

// Under --gpus N, before anything loads: every rank's device bytes (ep_memory_plan.h: its shard
// of `config`'s experts; rank 0 also every other weight, room to gather a layer, the prefix
// cache and a step's headroom) against its GPU's free memory, rank 0 owning fewer experts than
// an even share where its GPU cannot hold that (leader_experts_to_fit). resource_exhausted
// names the rank, the GPU, the bytes needed and those free. Returns rank 0's experts of each
// layer, for make_placement; 0 on one GPU (nothing to check).
Result<int64_t> check_ep_memory(const EngineOptions& options, const checkpoint::ModelConfig& config);

// Under --gpus N, once the checkpoint is bound and before a tensor is decoded (the engine's
// LoadOptions::before_decode): check_ep_memory's check again, from what the checkpoint as bound
// holds (`bound`, ep_memory_plan.h's bound plan) rather than what `config` declares, against
// each GPU's free memory now, rank 0 owning `leader_experts` (check_ep_memory's) of each layer.
// A checkpoint stored otherwise than its config declares (bf16 linears under a config that
// declares FP8) needs more; resource_exhausted then names the rank, the GPU, the bytes needed
// and free, and the bytes the checkpoint stores beyond its config's plan, so the load stops in
// seconds, not in a rank's copy. Nothing to check on one GPU, or for a checkpoint that does not
// bind cleanly (the engine refuses it for that).
Status check_bound_ep_memory(const EngineOptions& options, const checkpoint::ModelConfig& config,
                             const checkpoint::LoadPlan& bound, int64_t leader_experts);

// The device memory a step of the options' max_step_tokens holds (step_memory_plan.h), for
// sequences of up to max_context positions; a step never feeds more than max_batch of them
// whole, so the plan is for that many tokens at most.
StepMemoryPlan plan_step_memory(const EngineOptions& options,
                                const checkpoint::ModelConfig& config);

// Under --gpus N, before anything loads: the ranks' copies of their experts, of no layer yet,
// rank r's on GPU r, sharded as ExpertParallel will shard them (`leader_experts`,
// check_ep_memory's); for device_placement to fill as the loader goes. None on one GPU.
std::optional<ExpertShards> rank_copies(const EngineOptions& options,
                                        const checkpoint::ModelConfig& config,
                                        int64_t leader_experts);

// Where the loader puts the weights on a GPU: expert offload as asked, leaving room for the
// prefix cache and a step (kStepHeadroomBytes, or `step_bytes` where larger). With `copies`
// (rank_copies' under --gpus N) each main layer's routed experts go to the ranks instead as the
// loader places them (ExpertShards::take_layer as DevicePlacement::take_main_experts): every
// rank copies its share of the layer to its GPU and the host's copy is freed before the next
// layer is decoded, so the host holds one layer's experts at a time and no GPU another's (the
// MTP block's stay on GPU 0, unsharded). `copies` must outlive the load.
checkpoint::DevicePlacement device_placement(const EngineOptions& options, int64_t step_bytes = 0,
                                             ExpertShards* copies = nullptr);

// Each expert-parallel rank's device ordinal: rank r on GPU r under --gpus N (N ranks), else
// every rank on device 0, the model's (ranks sharing one GPU run the same code with every
// ordinal 0). Call after check_parallelism accepted `options`.
std::vector<int> rank_devices(const EngineOptions& options);

// The placement for the loaded weights (options.max_step_tokens sizes expert parallelism's
// symmetric buffers; `leader_experts`, check_ep_memory's, rank 0's share, 0: even). Under
// --gpus N the ranks take `copies`, rank_copies' filled during the load (the weights' main
// layers then keep their stacks' shapes only).
Result<std::unique_ptr<model::ExpertPlacement>> make_placement(
    const EngineOptions& options, checkpoint::ModelWeights& weights, int64_t leader_experts = 0,
    std::optional<ExpertShards> copies = std::nullopt);

}  // namespace dsv4::runtime

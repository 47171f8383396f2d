// Which placement (model/expert_placement.h) an engine's options ask for, and the checks that
// refuse the impossible ones before anything loads: expert parallelism (expert_parallel.h)
// over EngineOptions::expert_parallel ranks, else the single-device placement with expert offload
// (offloaded_experts.h).
#pragma once

#include <memory>

#include "checkpoint/weights.h"
#include "dsv4/engine.h"
#include "model/expert_placement.h"

namespace dsv4::runtime {

// The rank and GPU counts and what they need, from the options alone: a --gpus beyond the
// devices present names those present.
Status check_parallelism(const EngineOptions& options);

// The placement for the loaded weights (options.max_step_tokens sizes expert parallelism's
// symmetric buffers).
Result<std::unique_ptr<model::ExpertPlacement>> make_placement(
    const EngineOptions& options, const checkpoint::ModelWeights& weights);

}  // namespace dsv4::runtime

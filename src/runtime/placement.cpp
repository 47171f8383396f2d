#include "runtime/placement.h"

#include <algorithm>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/device.h"
#include "kernels/ep/expert_sharding.h"
#include "runtime/ep_memory_plan.h"
#include "runtime/expert_parallel.h"
#include "runtime/offloaded_experts.h"

namespace dsv4::runtime {
namespace {

std::string gpus_present() {
  const std::vector<std::string> names = cuda_device_names();
  if (names.empty()) return "this machine (or this build of dsv4) has no usable GPU";
  std::string list;
  for (size_t d = 0; d < names.size(); ++d) {
    list += (d ? ", " : "") + std::to_string(d) + ": " + names[d];
  }
  return "this machine has " + std::to_string(names.size()) + " (" + list + ")";
}

// --gpus N: N GPUs present, one rank each, on the GPU, the experts placed by the ranks (not
// expert offload), and every rank's GPU able to reach the leader's memory.
Status check_gpus(const EngineOptions& options) {
  const std::string gpus = "--gpus " + std::to_string(options.gpus);
  const auto present = static_cast<int64_t>(cuda_device_names().size());
  if (options.gpus > present) {
    return invalid_argument(gpus + " asks for " + std::to_string(options.gpus) + " GPUs; " +
                            gpus_present());
  }
  if (options.expert_parallel != options.gpus) {
    return invalid_argument(gpus + " runs one expert-parallel rank a GPU, so it needs --ep " +
                            std::to_string(options.gpus) + ", not " +
                            std::to_string(options.expert_parallel));
  }
  if (options.device != EngineDevice::kCuda) {
    return invalid_argument(gpus + " spreads the ranks over GPUs: it needs --device cuda");
  }
  if (options.expert_offload_layers != checkpoint::kAutoExpertOffload) {
    return invalid_argument(gpus +
                            " keeps every routed expert in host memory until each rank has "
                            "copied its share to its GPU: leave --expert-offload at auto");
  }
  // Checked again when the ranks are made; here so that a machine without it is told before
  // anything loads.
  for (int rank = 1; rank < options.gpus; ++rank) DSV4_RETURN_IF_ERROR(reach_leader(rank, 0, rank));
  return ok_status();
}

// What --gpus N's plans are laid against: rank r's GPU devices[r], with free_bytes[r] free now,
// and the room rank 0 keeps for the prefix cache and a step.
struct EpGpus {
  std::vector<int> devices;
  std::vector<int64_t> free_bytes;
  int64_t headroom = 0;
};

Result<EpGpus> ep_gpus(const EngineOptions& options, const checkpoint::ModelConfig& config) {
  EpGpus gpus;
  gpus.devices = rank_devices(options);
  const int was = current_device();
  for (const int device : gpus.devices) {
    Status asked = use_device(device);
    Result<int64_t> free = asked.ok() ? free_device_bytes(Device::kCuda) : Result<int64_t>(asked);
    if (!free.ok()) {
      (void)use_device(was);  // the error below is the one to report
      return free.status();
    }
    gpus.free_bytes.push_back(*free);
  }
  DSV4_RETURN_IF_ERROR(use_device(was));
  const int64_t step_bytes = plan_step_memory(options, config).total();
  gpus.headroom = device_placement(options, step_bytes).device_headroom;
  return gpus;
}

}  // namespace

Status check_parallelism(const EngineOptions& options) {
  const std::string ranks = std::to_string(options.expert_parallel);
  if (options.expert_parallel < 1 || options.expert_parallel > kernels::ep::kMaxRanks) {
    return invalid_argument("expert parallelism over " + ranks + " ranks: must be 1 to " +
                            std::to_string(kernels::ep::kMaxRanks));
  }
  if (options.gpus < 1) {
    return invalid_argument("gpus (" + std::to_string(options.gpus) + ") must be at least 1");
  }
  if (options.gpus > 1) DSV4_RETURN_IF_ERROR(check_gpus(options));
  if (options.expert_parallel == 1) return ok_status();
  if (options.cuda_graph && options.device == EngineDevice::kCuda) {
    return invalid_argument("expert parallelism over " + ranks +
                            " ranks runs each MoE layer on several threads, which one CUDA "
                            "graph cannot capture: leave --cuda-graph off");
  }
  if (options.experts != ExpertPrecision::kW4A4) {
    return unimplemented("expert parallelism over " + ranks +
                         " ranks moves NVFP4 activations between ranks: it needs the W4A4 "
                         "expert mode (--experts w4a4)");
  }
  return ok_status();
}

Result<int64_t> check_ep_memory(const EngineOptions& options,
                                const checkpoint::ModelConfig& config) {
  if (options.gpus <= 1) return int64_t{0};
  DSV4_ASSIGN_OR_RETURN(const EpMemoryPlan even,
                        plan_ep_memory(config, static_cast<int>(options.expert_parallel)));
  DSV4_ASSIGN_OR_RETURN(const EpGpus gpus, ep_gpus(options, config));
  const int64_t leader = leader_experts_to_fit(even, gpus.free_bytes.front(), gpus.headroom);
  DSV4_ASSIGN_OR_RETURN(const EpMemoryPlan plan, with_leader_experts(even, leader));
  DSV4_RETURN_IF_ERROR(check_ep_fits(plan, gpus.devices, gpus.free_bytes, gpus.headroom));
  return leader;
}

Status check_bound_ep_memory(const EngineOptions& options, const checkpoint::ModelConfig& config,
                             const checkpoint::LoadPlan& bound, int64_t leader_experts) {
  // A checkpoint that does not bind cleanly lacks slots in its plan; the engine refuses it for
  // the binding's problem once it has loaded.
  if (options.gpus <= 1 || !bound.first_problem.empty()) return ok_status();
  const int ranks = static_cast<int>(options.expert_parallel);
  DSV4_ASSIGN_OR_RETURN(const EpMemoryPlan declared, plan_ep_memory(config, ranks));
  DSV4_ASSIGN_OR_RETURN(const EpMemoryPlan as_bound,
                        plan_ep_memory(bound, config.n_routed_experts, ranks));
  DSV4_ASSIGN_OR_RETURN(const EpGpus gpus, ep_gpus(options, config));
  DSV4_ASSIGN_OR_RETURN(const EpMemoryPlan declared_laid,
                        with_leader_experts(declared, leader_experts));
  DSV4_ASSIGN_OR_RETURN(const EpMemoryPlan bound_laid,
                        with_leader_experts(as_bound, leader_experts));
  return check_bound_ep_fits(bound_laid, declared_laid, gpus.devices, gpus.free_bytes,
                             gpus.headroom);
}

StepMemoryPlan plan_step_memory(const EngineOptions& options,
                                const checkpoint::ModelConfig& config) {
  // Engine::open keeps max_batch ≤ max_step_tokens ≤ kMaxStepTokens, so the product below is
  // formed only when max_context is below that bound too, well inside int64.
  const int64_t tokens =
      options.max_context >= options.max_step_tokens
          ? options.max_step_tokens
          : std::min(options.max_step_tokens, options.max_batch * options.max_context);
  return plan_step_memory(config, {.tokens = tokens,
                                   .max_context = options.max_context,
                                   .max_batch = options.max_batch,
                                   .speculative_tokens = options.speculative_tokens,
                                   .numerics = options.numerics});
}

std::optional<ExpertShards> rank_copies(const EngineOptions& options,
                                        const checkpoint::ModelConfig& config,
                                        int64_t leader_experts) {
  if (options.gpus <= 1) return std::nullopt;
  // check_parallelism and check_ep_memory accepted this sharding already.
  const Result<kernels::ep::ExpertSharding> sharding = rank_sharding(
      config.n_routed_experts, static_cast<int>(options.expert_parallel), leader_experts);
  DSV4_CHECK(sharding.ok(), "rank_copies: %s", sharding.status().message().c_str());
  return ExpertShards::for_ranks(*sharding, rank_devices(options));
}

checkpoint::DevicePlacement device_placement(const EngineOptions& options, int64_t step_bytes,
                                             ExpertShards* copies) {
  checkpoint::DevicePlacement placement{
      .expert_offload_layers = options.expert_offload_layers,
      .device_headroom =
          (options.prefix_cache_mb << 20) + std::max(kStepHeadroomBytes, step_bytes)};
  if (copies != nullptr) {
    placement.take_main_experts = [copies](int64_t layer,
                                           checkpoint::RoutedExpertWeights& experts) {
      return copies->take_layer(layer, experts);
    };
  }
  return placement;
}

std::vector<int> rank_devices(const EngineOptions& options) {
  std::vector<int> devices(static_cast<size_t>(options.expert_parallel), 0);
  if (options.gpus > 1) {
    for (size_t rank = 0; rank < devices.size(); ++rank) devices[rank] = static_cast<int>(rank);
  }
  return devices;
}

Result<std::unique_ptr<model::ExpertPlacement>> make_placement(
    const EngineOptions& options, checkpoint::ModelWeights& weights, int64_t leader_experts,
    std::optional<ExpertShards> copies) {
  if (options.expert_parallel == 1) {
    return std::unique_ptr<model::ExpertPlacement>(std::make_unique<OffloadedExperts>());
  }
  // Dense routed experts (bf16/f32) run unsharded on rank 0; a checkpoint with no NVFP4 ones
  // would get nothing from the ranks but their cost.
  const bool any_nvfp4 =
      std::any_of(weights.layers.begin(), weights.layers.end(),
                  [](const checkpoint::LayerWeights& l) { return l.ffn.experts.is_nvfp4(); });
  if (!any_nvfp4) {
    return unimplemented("expert parallelism shards NVFP4 routed experts, and " +
                         options.model_dir +
                         " has dense ones only (dsv4 quantize makes an NVFP4 checkpoint of it)");
  }
  const ExpertParallelOptions ranks{
      .n_ranks = static_cast<int>(options.expert_parallel),
      .leader_experts = leader_experts,
      .device = options.device == EngineDevice::kCuda ? Device::kCuda : Device::kCpu,
      .rank_devices =
          options.device == EngineDevice::kCuda ? rank_devices(options) : std::vector<int>{},
      .weights = &weights,
      .max_tokens = options.max_step_tokens};
  // Under --gpus N the ranks' copies, made during the load, serve every read (a grouped step
  // gathers from them); the loader freed the host's.
  DSV4_ASSIGN_OR_RETURN(std::unique_ptr<ExpertParallel> ep,
                        copies ? ExpertParallel::create(weights.config, ranks, std::move(*copies))
                               : ExpertParallel::create(weights.config, ranks));
  return std::unique_ptr<model::ExpertPlacement>(std::move(ep));
}

}  // namespace dsv4::runtime

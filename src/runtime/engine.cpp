// Implements include/dsv4/engine.h: loads the checkpoint, owns the weights and the model, and
// hands generation to the scheduler (runtime/scheduler.h), whose worker steps every caller's
// sequences together.
#include "dsv4/engine.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/device.h"
#include "checkpoint/config.h"
#include "checkpoint/loader.h"
#include "checkpoint/to_device.h"
#include "dsv4/structured_output.h"
#include "runtime/expert_shards.h"
#include "runtime/placement.h"
#include "runtime/scheduler.h"
#include "runtime/speculative.h"
#include "runtime/step_memory_plan.h"

namespace dsv4 {
namespace {

// Speculative decoding drafts with the checkpoint's first MTP block, which must be there, and
// sliding-window only (as the release's is): a sequence resumed from a kept prefix skips the MTP
// block's positions it never ran, which a compressor's state cannot do.
Status check_speculation(const EngineOptions& options, const checkpoint::LoadedModel& loaded) {
  const std::string asked =
      "speculative decoding (" + std::to_string(options.speculative_tokens) + " tokens)";
  if (loaded.weights.mtp.empty()) {
    return invalid_argument(asked + " needs the checkpoint's MTP block, and " + options.model_dir +
                            " has none (no mtp.* tensors)");
  }
  const checkpoint::ModelConfig& c = loaded.weights.config;
  if (c.schedule(c.n_layer).attention != checkpoint::AttentionType::kSliding) {
    return unimplemented(asked + ": the MTP block of " + options.model_dir +
                         " has compressed attention; only a sliding-window one is supported");
  }
  return ok_status();
}

// The ids `decodable` refuses, ascending (none when it is not set).
std::vector<int64_t> undecodable_ids(const std::function<bool(int64_t)>& decodable,
                                     int64_t vocab_size) {
  std::vector<int64_t> ids;
  for (int64_t id = 0; decodable && id < vocab_size; ++id) {
    if (!decodable(id)) ids.push_back(id);
  }
  return ids;
}

// The ids every draw may take: all but the undecodable ones (null when that is all).
std::shared_ptr<const runtime::TokenMask> drawable_ids(const std::vector<int64_t>& undecodable,
                                                       int64_t vocab_size) {
  if (undecodable.empty()) return nullptr;
  auto mask = std::make_shared<runtime::TokenMask>(static_cast<size_t>((vocab_size + 31) / 32), 0u);
  for (int64_t id = 0; id < vocab_size; ++id) (*mask)[id / 32] |= 1u << (id % 32);
  for (const int64_t id : undecodable) (*mask)[id / 32] &= ~(1u << (id % 32));
  return mask;
}

// With --cuda-graph on: every decode step the server will run, captured before the first
// request (Model::plan_decode_graphs), said in a load note with the memory it holds and what the
// device has left for the sequences' caches.
Status plan_decode_graphs(const model::Model& model, const EngineOptions& options,
                          std::vector<std::string>& notes) {
  DSV4_ASSIGN_OR_RETURN(const model::DecodeGraphPlan plan,
                        model.plan_decode_graphs(options.max_batch, options.max_context));
  std::string sizes;
  for (const int64_t size : plan.sizes) sizes += (sizes.empty() ? "" : ", ") + std::to_string(size);
  std::string note = "decode graphs of " + (sizes.empty() ? "no batch size" : sizes + " rows") +
                     " captured at a context of " + std::to_string(options.max_context) +
                     ", holding " + std::to_string(plan.device_bytes >> 20) + " MiB";
  if (model.device() == Device::kCuda) {
    const Result<int64_t> free = free_device_bytes(Device::kCuda);
    if (free.ok()) note += " (" + std::to_string(*free >> 20) + " MiB of the device left free)";
  }
  if (!plan.note.empty()) note += "; " + plan.note;
  notes.push_back(std::move(note));
  return ok_status();
}

// On the GPU, once the weights and the decode graphs are in place: a step of max_step_tokens
// must fit in what is left beside the prefix cache's budget, so a step size too large for the
// device is refused here, naming the flag, not by an allocation failing mid-request. A load
// note says what a step holds.
Status check_step_memory(const runtime::StepMemoryPlan& plan, const EngineOptions& options,
                         std::vector<std::string>& notes) {
  DSV4_ASSIGN_OR_RETURN(const int64_t free, free_device_bytes(Device::kCuda));
  // What the decode graphs' eager steps gave back to the pool serves a step's allocations too.
  DSV4_ASSIGN_OR_RETURN(const int64_t idle, idle_pool_bytes(Device::kCuda));
  DSV4_RETURN_IF_ERROR(runtime::check_step_fits(plan, free + idle, options.prefix_cache_mb << 20));
  notes.push_back(runtime::describe(plan));
  return ok_status();
}

}  // namespace

struct Engine::State {
  checkpoint::ModelWeights weights;
  std::unique_ptr<model::ExpertPlacement> placement;  // reads the weights; the model calls it
  model::Model model;
  int64_t max_context;
  int64_t max_step_tokens;
  int64_t step_planned_bytes = 0;  // on the GPU, set by open
  std::vector<std::string> load_notes;
  std::vector<int64_t> undecodable;  // ascending: ids EngineOptions::decodable refused
  runtime::Scheduler scheduler;      // last: its worker steps the model above
  // options.placement is experts_at's.
  State(checkpoint::LoadedModel loaded, std::unique_ptr<model::ExpertPlacement> experts_at,
        model::ModelOptions options, const EngineOptions& engine)
      : weights(std::move(loaded.weights)),
        placement(std::move(experts_at)),
        model(weights, options),
        max_context(engine.max_context),
        max_step_tokens(engine.max_step_tokens),
        load_notes(std::move(loaded.report.notes)),
        undecodable(undecodable_ids(engine.decodable, model.config().vocab_size)),
        scheduler(model, static_cast<size_t>(engine.max_batch),
                  {.eos_token_id = model.config().eos_token_id,
                   .step_tokens = engine.max_step_tokens,
                   .prefix_cache_bytes = engine.prefix_cache_mb << 20,
                   .speculative_tokens = engine.speculative_tokens,
                   .speculate_always = engine.speculate_always,
                   .drawable = drawable_ids(undecodable, model.config().vocab_size)}) {}
};

Engine::Engine(std::unique_ptr<State> state) : state_(std::move(state)) {}
Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;

Result<Engine> Engine::open(const EngineOptions& options) {
  if (options.max_context <= 0) return invalid_argument("max_context must be positive");
  if (options.max_batch <= 0) return invalid_argument("max_batch must be positive");
  // The upper bound keeps the byte count (mb << 20) within int64.
  if (options.prefix_cache_mb < 0 || options.prefix_cache_mb > (int64_t{1} << 40)) {
    return invalid_argument("prefix_cache_mb must be in [0, 2^40]");
  }
  if (options.max_step_tokens < options.max_batch) {
    return invalid_argument("max_step_tokens (" + std::to_string(options.max_step_tokens) +
                            ") must be at least max_batch (" + std::to_string(options.max_batch) +
                            "): every sequence of a full batch decodes a token a step");
  }
  if (options.max_step_tokens > kMaxStepTokens) {
    return invalid_argument("max_step_tokens (" + std::to_string(options.max_step_tokens) +
                            ") must be at most " + std::to_string(kMaxStepTokens) +
                            ", the longest context a V4 model is trained to");
  }
  if (options.expert_offload_layers < -1) {
    return invalid_argument("expert_offload_layers must be -1 (automatic) or a count of layers");
  }
  if (options.device == EngineDevice::kCpu && options.expert_offload_layers > 0) {
    return invalid_argument(
        "expert offload keeps experts in host memory for a GPU; on the CPU "
        "every weight is in host memory already");
  }
  if (options.speculative_tokens < 0 ||
      options.speculative_tokens > runtime::kMaxSpeculativeTokens) {
    return invalid_argument("speculative_tokens (" + std::to_string(options.speculative_tokens) +
                            ") must be in [0, " + std::to_string(runtime::kMaxSpeculativeTokens) +
                            "]");
  }
  if (options.device == EngineDevice::kCpu && options.numerics == Numerics::kFast) {
    return invalid_argument(
        "numerics fast (FP8 linears, bf16 tensor-core attention) runs on a GPU; the CPU "
        "computes the exact profile only (numerics exact, or device cuda)");
  }
  DSV4_RETURN_IF_ERROR(runtime::check_parallelism(options));
  // The loader decodes on the host; each layer then goes to the device the model runs on.
  const Device device = options.device == EngineDevice::kCuda ? Device::kCuda : Device::kCpu;
  // On a GPU the placement leaves room for a step (runtime/step_memory_plan.h), from the config.
  runtime::StepMemoryPlan step;
  int64_t ep_leader_experts = 0;  // under --gpus N, rank 0's share of each layer's experts
  // Under --gpus N, the ranks' copies of their experts, made layer by layer as the loader goes.
  std::optional<runtime::ExpertShards> rank_copies;
  checkpoint::LoadOptions load_options;
  if (device == Device::kCuda) {
    DSV4_ASSIGN_OR_RETURN(const checkpoint::ModelConfig config,
                          checkpoint::load_model_config(options.model_dir));
    step = runtime::plan_step_memory(options, config);
    DSV4_ASSIGN_OR_RETURN(ep_leader_experts, runtime::check_ep_memory(options, config));
    // The checkpoint may hold more than its config declares: checked again once it is bound.
    load_options.before_decode = [&options, config,
                                  &ep_leader_experts](const checkpoint::LoadPlan& bound) {
      return runtime::check_bound_ep_memory(options, config, bound, ep_leader_experts);
    };
    rank_copies = runtime::rank_copies(options, config, ep_leader_experts);
  }
  const checkpoint::DevicePlacement placement = runtime::device_placement(
      options, step.total(), rank_copies ? &*rank_copies : nullptr);
  DSV4_ASSIGN_OR_RETURN(
      checkpoint::LoadedModel loaded,
      device == Device::kCpu
          ? checkpoint::load_model(options.model_dir)
          : checkpoint::load_model_on(options.model_dir, device, placement, load_options));
  if (!loaded.report.clean()) {
    return data_loss(options.model_dir +
                     ": checkpoint does not bind cleanly: " + loaded.report.first_problem());
  }
  if (options.speculative_tokens > 0) DSV4_RETURN_IF_ERROR(check_speculation(options, loaded));
  model::ModelOptions model_options{.expert_mode = options.experts == ExpertPrecision::kW4A4
                                                       ? model::ExpertMode::kW4A4
                                                       : model::ExpertMode::kW4A16,
                                    .numerics = options.numerics};
  DSV4_ASSIGN_OR_RETURN(std::unique_ptr<model::ExpertPlacement> experts_at,
                        runtime::make_placement(options, loaded.weights, ep_leader_experts,
                                                std::move(rank_copies)));
  model_options.placement = experts_at.get();
  model_options.cuda_graph = options.cuda_graph;
  model_options.cuda_graph_max_batch = options.max_batch;
  auto state =
      std::make_unique<State>(std::move(loaded), std::move(experts_at), model_options, options);
  // The scheduler's worker waits for the first request, which comes only once open returns.
  if (options.cuda_graph) {
    DSV4_RETURN_IF_ERROR(plan_decode_graphs(state->model, options, state->load_notes));
  }
  if (device == Device::kCuda) {
    DSV4_RETURN_IF_ERROR(check_step_memory(step, options, state->load_notes));
    state->step_planned_bytes = step.total();
  }
  return Engine(std::move(state));
}

int64_t Engine::vocab_size() const { return state_->model.config().vocab_size; }
int64_t Engine::eos_token_id() const { return state_->model.config().eos_token_id; }
const std::vector<std::string>& Engine::load_notes() const { return state_->load_notes; }

namespace {

// What an id the model has and the tokenizer lacks is: never drawn, so not asked for either.
Status check_decodable(const char* field, int64_t id, const std::vector<int64_t>& undecodable) {
  if (!std::binary_search(undecodable.begin(), undecodable.end(), id)) return ok_status();
  return invalid_argument(std::string(field) + " token id " + std::to_string(id) +
                          " is not in the tokenizer's vocabulary (the model never draws it)");
}

Status check_request(const GenerateRequest& r, int64_t max_context, int64_t vocab_size,
                     const std::vector<int64_t>& undecodable) {
  const SamplingParams& s = r.sampling;
  if (r.prompt.empty()) return invalid_argument("empty prompt");
  for (const int64_t id : r.prompt) {
    if (id < 0 || id >= vocab_size) {
      return invalid_argument("prompt token id " + std::to_string(id) +
                              " outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    }
    DSV4_RETURN_IF_ERROR(check_decodable("prompt", id, undecodable));
  }
  if (s.max_tokens < 0) return invalid_argument("max_tokens must be >= 0");
  if (!(s.temperature >= 0.0f)) return invalid_argument("temperature must be >= 0");
  if (s.top_k < 0) return invalid_argument("top_k must be >= 0");
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) return invalid_argument("top_p must be in (0, 1]");
  if (!(std::fabs(s.presence_penalty) <= 2.0f) || !(std::fabs(s.frequency_penalty) <= 2.0f)) {
    return invalid_argument("presence_penalty and frequency_penalty must be in [-2, 2]");
  }
  for (const auto& [id, bias] : s.logit_bias) {
    if (id < 0 || id >= vocab_size) {
      return invalid_argument("logit_bias token id " + std::to_string(id) +
                              " outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    }
    DSV4_RETURN_IF_ERROR(check_decodable("logit_bias", id, undecodable));
    if (!(std::fabs(bias) <= 100.0f)) {
      return invalid_argument("logit_bias of token " + std::to_string(id) +
                              " must be in [-100, 100]");
    }
  }
  if (s.constraint && s.constraint->vocab_size() != vocab_size) {
    return invalid_argument("the constraint's vocabulary has " +
                            std::to_string(s.constraint->vocab_size()) + " tokens, the model " +
                            std::to_string(vocab_size));
  }
  // Alone first: the sum of a max_tokens near INT64_MAX and the prompt would overflow.
  if (s.max_tokens > max_context) {
    return invalid_argument("max_tokens = " + std::to_string(s.max_tokens) +
                            " exceeds the context of " + std::to_string(max_context));
  }
  const auto needed = static_cast<int64_t>(r.prompt.size()) + s.max_tokens;
  if (needed > max_context) {
    return invalid_argument("prompt + max_tokens = " + std::to_string(needed) +
                            " exceeds the context of " + std::to_string(max_context));
  }
  return ok_status();
}

}  // namespace

Status Engine::check(const GenerateRequest& request) const {
  return check_request(request, state_->max_context, vocab_size(), state_->undecodable);
}

Result<Generation> Engine::generate(const GenerateRequest& request) {
  DSV4_ASSIGN_OR_RETURN(std::vector<Generation> out, generate_batch({request}));
  return std::move(out.front());
}

EngineStats Engine::stats() const {
  EngineStats now = state_->scheduler.stats();
  const model::DecodeGraphStats graphs = state_->model.decode_graph_stats();
  now.decode_graphs = graphs.graphs;
  now.decode_graph_bytes = graphs.device_bytes;
  now.decode_graph_captures = graphs.captures;
  now.decode_graph_planned_batch = graphs.planned_batch;
  now.decode_graph_planned_bytes = graphs.planned_bytes;
  now.max_step_tokens = state_->max_step_tokens;
  now.step_planned_bytes = state_->step_planned_bytes;
  now.verify_graph_replays = graphs.verify_replays;
  now.draft_graph_replays = graphs.draft_replays;
  return now;
}

Result<std::vector<Generation>> Engine::generate_batch(
    const std::vector<GenerateRequest>& requests) {
  for (const GenerateRequest& r : requests) DSV4_RETURN_IF_ERROR(check(r));
  return state_->scheduler.run(requests);
}

}  // namespace dsv4

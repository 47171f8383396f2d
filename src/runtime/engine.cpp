// Implements include/dsv4/engine.h: loads the checkpoint, owns the weights and the model, and
// drives generation (batched prefill, then one batched decode step per token) over Sessions.
#include "dsv4/engine.h"

#include <string>
#include <utility>

#include "checkpoint/loader.h"
#include "checkpoint/to_device.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace dsv4 {

struct Engine::State {
  checkpoint::ModelWeights weights;
  model::Model model;
  int64_t max_context;
  State(checkpoint::ModelWeights w, model::ModelOptions options, int64_t context)
      : weights(std::move(w)), model(weights, options), max_context(context) {}
};

Engine::Engine(std::unique_ptr<State> state) : state_(std::move(state)) {}
Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;

Result<Engine> Engine::open(const EngineOptions& options) {
  if (options.max_context <= 0) return invalid_argument("max_context must be positive");
  DSV4_ASSIGN_OR_RETURN(checkpoint::LoadedModel loaded, checkpoint::load_model(options.model_dir));
  if (!loaded.report.clean()) {
    const auto& r = loaded.report;
    std::string first = !r.problems.empty() ? r.problems.front()
                        : !r.zero_tensors.empty()
                            ? "all-zero tensor " + r.zero_tensors.front()
                            : "non-finite tensor " + r.non_finite_tensors.front();
    return data_loss(options.model_dir + ": checkpoint does not bind cleanly: " + first);
  }
  const model::ModelOptions model_options{options.experts == ExpertPrecision::kW4A4
                                              ? model::ExpertMode::kW4A4
                                              : model::ExpertMode::kW4A16};
  // The loader decodes on the host; the model then runs wherever its weights are.
  checkpoint::ModelWeights weights = std::move(loaded.weights);
  if (options.device == EngineDevice::kCuda) {
    DSV4_ASSIGN_OR_RETURN(weights, checkpoint::copy_weights(weights, Device::kCuda));
  }
  return Engine(std::make_unique<State>(std::move(weights), model_options, options.max_context));
}

int64_t Engine::vocab_size() const { return state_->model.config().vocab_size; }
int64_t Engine::eos_token_id() const { return state_->model.config().eos_token_id; }

namespace {

Status check_request(const GenerateRequest& r, int64_t max_context, int64_t vocab_size) {
  const SamplingParams& s = r.sampling;
  if (r.prompt.empty()) return invalid_argument("empty prompt");
  for (const int64_t id : r.prompt) {
    if (id < 0 || id >= vocab_size) {
      return invalid_argument("prompt token id " + std::to_string(id) +
                              " outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    }
  }
  if (s.max_tokens < 0) return invalid_argument("max_tokens must be >= 0");
  if (!(s.temperature >= 0.0f)) return invalid_argument("temperature must be >= 0");
  if (s.top_k < 0) return invalid_argument("top_k must be >= 0");
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) return invalid_argument("top_p must be in (0, 1]");
  const auto needed = static_cast<int64_t>(r.prompt.size()) + s.max_tokens;
  if (needed > max_context) {
    return invalid_argument("prompt + max_tokens = " + std::to_string(needed) +
                            " exceeds the context of " + std::to_string(max_context));
  }
  return ok_status();
}

}  // namespace

Status Engine::check(const GenerateRequest& request) const {
  return check_request(request, state_->max_context, vocab_size());
}

Result<Generation> Engine::generate(const GenerateRequest& request) {
  DSV4_ASSIGN_OR_RETURN(std::vector<Generation> out, generate_batch({request}));
  return std::move(out.front());
}

Result<std::vector<Generation>> Engine::generate_batch(
    const std::vector<GenerateRequest>& requests) {
  const model::Model& model = state_->model;
  std::vector<runtime::Session> sessions;
  std::vector<runtime::Sampler> samplers;
  std::vector<runtime::StepInput> inputs;
  for (const GenerateRequest& r : requests) {
    DSV4_RETURN_IF_ERROR(check(r));
    const auto context = static_cast<int64_t>(r.prompt.size()) + r.sampling.max_tokens;
    DSV4_ASSIGN_OR_RETURN(runtime::Session s, runtime::Session::create(model, context));
    sessions.push_back(std::move(s));
    samplers.emplace_back(r.sampling);
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    inputs.push_back({&sessions[i], requests[i].prompt, requests[i].return_prompt_logits});
  }
  DSV4_RETURN_IF_ERROR(runtime::step(model, inputs));  // prefill, all prompts in one forward

  std::vector<Generation> out(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].return_prompt_logits)
      out[i].prompt_logits.assign(sessions[i].logits().begin(), sessions[i].logits().end());
  }
  while (true) {
    inputs.clear();
    for (size_t i = 0; i < requests.size(); ++i) {
      const SamplingParams& s = requests[i].sampling;
      Generation& g = out[i];
      if (g.stopped_at_eos || g.stopped_by_caller ||
          static_cast<int64_t>(g.tokens.size()) >= s.max_tokens) {
        continue;
      }
      const std::span<const float> next = sessions[i].next_token_logits();
      g.tokens.push_back(samplers[i].sample(next));
      if (requests[i].return_step_logits)
        g.step_logits.insert(g.step_logits.end(), next.begin(), next.end());
      g.stopped_at_eos = s.stop_at_eos && g.tokens.back() == eos_token_id();
      g.stopped_by_caller = requests[i].on_token && !requests[i].on_token(g.tokens.back());
      // The last token needs no forward: nothing will be drawn after it.
      if (!g.stopped_at_eos && !g.stopped_by_caller &&
          static_cast<int64_t>(g.tokens.size()) < s.max_tokens) {
        inputs.push_back({&sessions[i], std::span<const int64_t>(&g.tokens.back(), 1), false});
      }
    }
    if (inputs.empty()) return out;
    DSV4_RETURN_IF_ERROR(runtime::step(model, inputs));
  }
}

}  // namespace dsv4

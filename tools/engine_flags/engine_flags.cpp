#include "engine_flags.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace dsv4::tools {

void add_engine_flags(CLI::App* cmd, EngineFlags& flags, bool model_required) {
  if (model_required) {
    cmd->add_option("--model", flags.model, "checkpoint directory")->required();
  } else {
    cmd->add_option(
        "--model", flags.model,
        "checkpoint directory (default: $DSV4_MODEL, else the small embedded Brown-corpus model)");
  }
  cmd->add_option("--device", flags.device, "cpu or cuda")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--experts", flags.experts, "NVFP4 expert mode")
      ->capture_default_str()
      ->check(CLI::IsMember({"w4a16", "w4a4"}));
  cmd->add_option("--expert-offload", flags.expert_offload,
                  "layers whose NVFP4 routed experts stay in host memory, copied to the GPU over "
                  "PCIe as each step needs them: auto (as few as make the rest fit; none when all "
                  "fit) or a number")
      ->capture_default_str()
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            if (text == "auto") return {};
            char* end = nullptr;
            const long long layers = std::strtoll(text.c_str(), &end, 10);
            if (end != text.c_str() && *end == '\0' && layers >= 0 && layers <= 1000000) return {};
            return "must be auto or a number of layers, not " + text;
          },
          "auto|LAYERS"));
  cmd->add_option("--speculative", flags.speculative,
                  "speculative decoding: tokens the checkpoint's MTP block drafts for each step "
                  "to verify (1 to 4; 0: off); greedy output is unchanged, sampled output keeps "
                  "its distribution")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{4}));
  cmd->add_option("--numerics", flags.numerics,
                  "how the GPU computes (docs/numerics.md): exact (f32-exact, as verified "
                  "against transformers), fast (DeepSeek's own inference numerics: FP8 "
                  "linears, bf16 tensor-core attention; GPU only) or auto (fast with --device "
                  "cuda, exact with --device cpu)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "exact", "fast"}));
  // Expert parallelism (docs/ep.md): the range and what the ranks need are the engine's to check,
  // so its messages are the same from every command.
  cmd->add_option("--ep", flags.ep,
                  "expert parallelism: the routed experts sharded over N ranks sharing the one "
                  "device (or one a GPU with --gpus N), the same tokens as one rank (1 to 8; "
                  "needs --experts w4a4)")
      ->capture_default_str();
  cmd->add_option("--gpus", flags.gpus,
                  "GPUs the expert-parallel ranks spread over, one rank each (needs --ep N and "
                  "--device cuda; more than the machine has is refused, naming what it has)")
      ->capture_default_str();
  cmd->add_option("--cuda-graph", flags.cuda_graph,
                  "on the GPU, replay each decode step (and speculative decoding's verify and "
                  "draft steps) as a CUDA graph, with the eager step's bits; off: launch its ops "
                  "one by one; auto: on with --device cuda and one rank")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "on", "off"}));
  add_max_step_tokens_flag(cmd, flags.max_step_tokens);
}

void add_max_step_tokens_flag(CLI::App* cmd, int64_t& max_step_tokens) {
  // The range against the batch and the device's memory is Engine::open's to check, so its
  // messages are the same from every command.
  cmd->add_option("--max-step-tokens", max_step_tokens,
                  "most tokens a forward takes: a decode token for each sequence, then prompts "
                  "in chunks of what is left (default " +
                      std::to_string(kDefaultMaxStepTokens) +
                      "; at least the batch). Larger prefills faster (the experts' GEMM tiles "
                      "fill) but holds the other sequences' next tokens back by one such step "
                      "when a long prompt joins, and needs more device memory (checked at open)")
      ->check(positive())
      ->check(CLI::Range(int64_t{1}, kMaxStepTokens));
}

namespace {

// A check that `text`, read as a number, satisfies `holds`; text that is no number passes here
// and is refused by the option's conversion, which names it.
CLI::Validator number_rule(bool (*holds)(double), const std::string& rule,
                           const std::string& name) {
  return CLI::Validator(
      [holds, rule](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0' || holds(value)) return {};
        return "must be " + rule + ", not " + text;
      },
      name);
}

}  // namespace

CLI::Validator non_negative() {
  return number_rule([](double value) { return value >= 0 && std::isfinite(value); },
                     "finite and non-negative", "NONNEGATIVE");
}

CLI::Validator positive() {
  return number_rule([](double value) { return value > 0 && std::isfinite(value); },
                     "finite and positive", "POSITIVE");
}

void add_sampling_flags(CLI::App* cmd, SamplingParams& sampling) {
  cmd->add_option("--temperature", sampling.temperature, "0 = greedy")
      ->capture_default_str()
      ->check(non_negative());
  cmd->add_option("--top-k", sampling.top_k, "keep the k most likely tokens (0 = all)")
      ->check(non_negative());
  cmd->add_option("--top-p", sampling.top_p, "nucleus probability mass")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--seed", sampling.seed, "sampling seed")->capture_default_str();
  cmd->add_option("--presence-penalty", sampling.presence_penalty,
                  "less this on the logit of every token already generated")
      ->check(CLI::Range(-2.0, 2.0));
  cmd->add_option("--frequency-penalty", sampling.frequency_penalty,
                  "less this on a token's logit for every time it was generated")
      ->check(CLI::Range(-2.0, 2.0));
}

void add_prefix_cache_flag(CLI::App* cmd, int64_t& prefix_cache_mb) {
  cmd->add_option("--prefix-cache-mb", prefix_cache_mb,
                  "device memory (MiB) for states kept so that prompts beginning with the same "
                  "tokens (a chat's next turn) skip them; 0: off")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
}

EngineOptions engine_options(const EngineFlags& flags, const char* command) {
  EngineOptions options;
  options.model_dir = flags.model;
  if (options.model_dir.empty()) {
    if (const char* env = std::getenv("DSV4_MODEL"); env && *env) {
      options.model_dir = env;
    } else {
      options.model_dir = std::string(DSV4_SOURCE_DIR) + "/tests/golden/brown_small/model";
      std::fprintf(stderr,
                   "dsv4 %s: no --model, using the embedded model %s (a 6.6M-parameter "
                   "DeepSeek-V4 trained on the Brown corpus, docs/quality.md)\n",
                   command, options.model_dir.c_str());
    }
  }
  options.device = flags.device == "cuda" ? EngineDevice::kCuda : EngineDevice::kCpu;
  options.experts = flags.experts == "w4a4" ? ExpertPrecision::kW4A4 : ExpertPrecision::kW4A16;
  // The flag's check let through "auto" and whole numbers only.
  options.expert_offload_layers =
      flags.expert_offload == "auto" ? -1 : std::strtoll(flags.expert_offload.c_str(), nullptr, 10);
  options.speculative_tokens = flags.speculative;
  // auto: the GPU's default is fast, its perplexity within 0.3 % of exact's on the trained
  // model (docs/quality.md) at two thirds of the time to first token; the CPU has exact only.
  const bool fast = flags.numerics == "fast" ||
                    (flags.numerics == "auto" && options.device == EngineDevice::kCuda);
  options.numerics = fast ? Numerics::kFast : Numerics::kExact;
  options.max_step_tokens =
      flags.max_step_tokens > 0 ? flags.max_step_tokens : kDefaultMaxStepTokens;
  // The commands without --max-batch (generate, chat, verify) run one sequence at a time: a step
  // smaller than the default batch lowers it to fit. serve, bench and eval set theirs after.
  options.max_batch = std::min(options.max_batch, options.max_step_tokens);
  options.expert_parallel = flags.ep;
  options.gpus = flags.gpus;
  // auto: a replayed step is 7-18 % faster a layer than the eager one at B = 1-32 on V4-Flash's
  // shapes (docs/bench.md); ranks run a layer on several threads, which no graph captures.
  options.cuda_graph = flags.cuda_graph == "on" ||
                       (flags.cuda_graph == "auto" && options.device == EngineDevice::kCuda &&
                        options.expert_parallel == 1);
  return options;
}

Result<EngineOptions> exact_engine_options(const EngineFlags& flags, const char* command) {
  // The oracle's logits are f32-exact; only the exact profile is held to them (the fast one's
  // distance from exact is measured by the CUDA tests and dsv4 eval, docs/numerics.md).
  if (flags.numerics == "fast") {
    return invalid_argument(
        "--numerics fast: " + std::string(command) +
        " checks the exact profile against the oracle; fast departs from it by design "
        "(docs/numerics.md), so use --numerics exact or leave it out");
  }
  EngineOptions options = engine_options(flags, command);
  options.numerics = Numerics::kExact;
  return options;
}

const char* numerics_name(Numerics numerics) {
  return numerics == Numerics::kFast ? "fast" : "exact";
}

Result<Engine> open_engine(const EngineOptions& options, const char* command) {
  Result<Engine> engine = Engine::open(options);
  if (engine.ok()) {
    for (const std::string& note : engine->load_notes()) {
      std::fprintf(stderr, "dsv4 %s: note: %s\n", command, note.c_str());
    }
  }
  return engine;
}

}  // namespace dsv4::tools

// The flags every command that runs the engine shares (dsv4 generate, chat, eval, verify, bench,
// and dsv4-serve): the checkpoint, the device and the NVFP4 expert mode, and the EngineOptions they
// make.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "dsv4/engine.h"

namespace dsv4::tools {

struct EngineFlags {
  std::string model;  // empty: $DSV4_MODEL, else the embedded model (see engine_options)
  std::string device = "cpu";
  std::string experts = "w4a16";
  std::string expert_offload = "auto";  // or a number of layers
  int64_t speculative = 0;              // drafted tokens a step (EngineOptions)
  int64_t ep = 1;                       // expert-parallel ranks on the one device
  int64_t gpus = 1;                     // GPUs the ranks spread over
  std::string cuda_graph = "auto";      // or on, off (engine_options)
  std::string numerics = "auto";        // or exact, fast (docs/numerics.md; engine_options)
  int64_t max_step_tokens = 0;          // 0: the command's default (kDefaultMaxStepTokens)
};

// --model (required when model_required, else optional with the default above), --device,
// --experts, --expert-offload, --speculative, --ep, --gpus, --cuda-graph, --numerics and
// --max-step-tokens, with their allowed values checked by CLI11 (what a step size needs of the
// batch and the device, Engine::open checks).
void add_engine_flags(CLI::App* cmd, EngineFlags& flags, bool model_required);

// --max-step-tokens into `max_step_tokens` (left 0 when not given): add_engine_flags' own, and
// dsv4 check --plan's, which prints what a step of it needs.
void add_max_step_tokens_flag(CLI::App* cmd, int64_t& max_step_tokens);

// --temperature, --top-k, --top-p, --seed, --presence-penalty, --frequency-penalty into
// `sampling` (dsv4 generate and chat), their ranges checked by CLI11.
void add_sampling_flags(CLI::App* cmd, SamplingParams& sampling);

// --prefix-cache-mb, for the commands that run many requests on one engine (serve, bench).
void add_prefix_cache_flag(CLI::App* cmd, int64_t& prefix_cache_mb);

// Checks for numeric flags that name the rule a value breaks ("--max-context: must be finite and
// positive, not 0"). CLI11 2.1's NonNegativeNumber and PositiveNumber are ranges up to DBL_MAX
// whose message spells that bound out in 309 digits, and for a positive one reads "0 not in
// range 0 to ...".
CLI::Validator non_negative();
CLI::Validator positive();

// The options the flags ask for (max_step_tokens: --max-step-tokens, else
// kDefaultMaxStepTokens). Without --model: $DSV4_MODEL, else the small trained model in
// the repository (tests/golden/brown_small/model, English from the Brown corpus), which
// `command` says on stderr. --numerics auto is fast on cuda (DeepSeek's own inference numerics,
// within 0.3 % of exact's perplexity, docs/quality.md) and exact on the CPU, its only profile;
// --numerics fast with --device cpu is Engine::open's invalid_argument.
EngineOptions engine_options(const EngineFlags& flags, const char* command);

// The options for a command that checks the exact profile against an oracle (dsv4 verify): auto
// is exact on either device; --numerics fast is invalid_argument, saying why.
Result<EngineOptions> exact_engine_options(const EngineFlags& flags, const char* command);

// "exact" or "fast", as --numerics spells it: what a command reports it ran.
const char* numerics_name(Numerics numerics);

// Engine::open, then the engine's load notes on stderr ("dsv4 COMMAND: note: ..."): which
// experts went to host memory, which stayed in f32.
Result<Engine> open_engine(const EngineOptions& options, const char* command);

}  // namespace dsv4::tools

// The public API of dsv4: open a DeepSeek-V4 checkpoint, generate token ids. The CLI and the
// server see only this header and dsv4/status.h - never a tensor or a device type.
//
//   auto engine = dsv4::Engine::open({.model_dir = "path/to/model"});
//   if (!engine.ok()) { print(engine.status()); return 1; }
//   auto out = engine->generate({.prompt = {0, 21, 5}, .sampling = {.max_tokens = 16}});
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "dsv4/numerics.h"
#include "dsv4/status.h"

namespace dsv4 {

enum class EngineDevice { kCpu, kCuda };

// How NVFP4 routed experts multiply; checkpoints with BF16/FP8 experts ignore it.
enum class ExpertPrecision {
  kW4A16,  // activations stay 16/32-bit, weights decoded from NVFP4
  kW4A4,   // activations staged to NVFP4 too, global scales applied as the GEMM alpha
};

// The default EngineOptions::max_step_tokens. A larger step fills the routed experts' GEMM
// tiles and the tensor cores better (a prefill's experts see T·K/E rows each: at 2048 tokens
// about 48 on V4-Flash, in tiles of 128-256 rows), so a long prompt prefills faster; but a
// prompt that joins a running batch holds every other sequence's next token back by one step of
// that size, and the step's activations grow with it (runtime/step_memory_plan.h: about 0.55 MiB
// a token on V4-Flash). 8192, as chunked-prefill servers default on this class of GPU: eight
// 2048-token prompts prefill 1.27× faster than at 2048 and within 1.10× of 16384 (docs/bench.md),
// for 4.7 GiB of step memory at a batch of 32 instead of 1.4 (9.2 at 16384).
inline constexpr int64_t kDefaultMaxStepTokens = 8192;
// The largest EngineOptions::max_step_tokens: the longest context V4 models are trained to
// (2^20 positions); the memory plan refuses far smaller steps on any GPU, and this bound keeps
// its arithmetic inside int64 and catches a mistyped flag with a plain message.
inline constexpr int64_t kMaxStepTokens = int64_t{1} << 20;

struct EngineOptions {
  std::string model_dir;  // config.json + *.safetensors (any naming convention the loader knows)
  EngineDevice device = EngineDevice::kCpu;
  ExpertPrecision experts = ExpertPrecision::kW4A16;
  int64_t max_context = 4096;  // most tokens (prompt + generated) one sequence may hold
  // Most sequences stepped together; requests beyond it wait, in arrival order, for a place.
  int64_t max_batch = 32;
  // Most tokens one forward takes: a decode token for each sequence, then prompts in chunks in
  // what is left (chunked prefill), so a long prompt that joins holds the others' next tokens
  // back by one such step at most. In [max_batch, kMaxStepTokens]; on a GPU, what a step of it
  // holds is planned at open and refused there when the device cannot hold it (a load note
  // says the bytes).
  int64_t max_step_tokens = kDefaultMaxStepTokens;
  // Device memory for the states of finished sequences and prompts, kept so that a prompt that
  // begins with the same tokens (a chat's next turn, a system prompt or document sent again)
  // starts from there instead of computing them again; least recently used out first. They
  // make way when a new sequence needs the memory. 0: no prefix cache.
  int64_t prefix_cache_mb = 1024;
  // On a GPU that cannot hold every weight: how many layers keep their NVFP4 routed experts in
  // pinned host memory, which the GPU reads over PCIe (slower, but the model runs). -1: as few
  // as make the rest fit beside the prefix cache and a step's scratch (none when all fit).
  int64_t expert_offload_layers = -1;
  // When set, whether the tokenizer decodes an id, asked once for each id at open: an id it
  // does not (DeepSeek's tokenizer.json has 128,815 tokens for the model's 129,280 logits) is
  // never drawn, and a prompt or logit_bias that names one is refused.
  std::function<bool(int64_t id)> decodable = nullptr;
  // Speculative decoding: each decoding sequence feeds, with its last token, this many tokens
  // the checkpoint's MTP block drafted (0 .. 4; 0: off), and keeps those the model would have
  // drawn itself (greedy: the same tokens as without; sampled: the same distribution). Needs a
  // checkpoint with MTP weights. A constrained sequence's drafts are drawn within its constraint.
  int64_t speculative_tokens = 0;
  // With speculative_tokens: draft in every step. Otherwise a step drafts only where the
  // batch's own measured step times say speculation pays at its size (more tokens a second
  // than plain steps: at batch 1 on a large model, not where the verify forward costs too much;
  // runtime/speculation_policy.h). The tokens are the same either way.
  bool speculate_always = false;
  // How the GPU computes (dsv4/numerics.h); the CPU has kExact only (kFast: invalid_argument).
  // kExact unless asked (the tools' --numerics auto asks kFast on cuda). FP8 linears stay FP8.
  Numerics numerics = Numerics::kExact;
  // Expert parallelism (docs/ep.md): the NVFP4 routed experts sharded over this many ranks
  // (1 .. 8; 1: off), all stepping the same batch, the same tokens as one rank's. The ranks are
  // threads sharing `device`, or one a GPU (gpus); they move NVFP4 rows, so they need
  // ExpertPrecision::kW4A4.
  int64_t expert_parallel = 1;
  // GPUs the ranks spread over, one rank each (1: the one device); needs expert_parallel equal
  // to it and EngineDevice::kCuda. Every routed expert then loads into pinned host memory, and
  // each rank copies its share to its GPU. More than the machine has is refused, naming what it
  // has.
  int64_t gpus = 1;
  // On the GPU, each decode step (one token of every running sequence) replayed as a CUDA graph:
  // one launch instead of a few hundred. open captures one a batch bucket
  // (1, 2, 4, … max_batch) at max_context, so their memory is held before the first request
  // and no request captures a decode step (a load note says what they hold;
  // docs/decode_graph.md). With speculative_tokens, its verify steps and MTP draft calls too,
  // captured as their shapes are met.
  bool cuda_graph = false;
};

class TokenConstraint;  // dsv4/structured_output.h

// How a token is drawn from the logits: penalties and bias first, then the constraint's mask,
// then greedy or temperature sampling within top-k and top-p. Logprobs (TokenLogprob) are of
// the raw logits, before any of these (as OpenAI reports them, constrained or not).
struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy (argmax); otherwise softmax(logits / temperature)
  int64_t top_k = 0;         // keep the k most likely tokens; 0 keeps all
  float top_p = 1.0f;        // keep the smallest set whose probability reaches top_p
  uint64_t seed = 0;         // the same seed and inputs give the same tokens
  int64_t max_tokens = 16;   // generated tokens at most
  bool stop_at_eos = true;   // stop after the model's eos token (which is kept in the output)
  // OpenAI's penalties, in [-2, 2], on the tokens this sequence generated: each one's logit
  // less presence_penalty once it appeared and frequency_penalty for every time it did.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // Added to these tokens' logits, in [-100, 100] (OpenAI's logit_bias: -100 bans, +100 forces).
  std::vector<std::pair<int64_t, float>> logit_bias = {};
  // Structured outputs: only tokens that keep the reply matching this format are drawn, eos
  // once it is complete (dsv4/structured_output.h). Null: unconstrained.
  std::shared_ptr<const TokenConstraint> constraint = nullptr;
};

// A token's log-probability under the model: the log-softmax of the raw logits (before
// temperature, top-k or top-p), with the most likely tokens at that position.
struct TokenLogprob {
  int64_t token = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int64_t, float>> top;  // (token, logprob), most likely first
};

struct GenerateRequest {
  std::vector<int64_t> prompt;  // token ids, at least one
  SamplingParams sampling;
  bool return_prompt_logits = false;  // every prompt position's logits (verification)
  bool return_step_logits = false;    // the logits each generated token was drawn from
  // Each generated token's TokenLogprob with this many alternatives (0: the token's alone);
  // -1: none.
  int64_t logprobs = -1;
  bool prompt_logprobs = false;  // each prompt token's too (from the second), as many alternatives
  // When set, called with each generated token as it is drawn, so a caller can stream; returning
  // false stops this sequence there, the token kept (a server's client went away). Runs on the
  // thread that called generate(), while the engine goes on stepping (it may have drawn a token
  // or two past a stop; they are dropped from the result).
  std::function<bool(int64_t token)> on_token = nullptr;
  // With logprobs >= 0 and on_token set: called with each generated token's TokenLogprob just
  // before on_token sees that token (on the same thread, in the same order), so a stream can carry
  // them.
  std::function<void(const TokenLogprob& logprob)> on_logprob = nullptr;
  // When set and it turns true (a server's client went away), the sequence ends at the engine's
  // next step with the tokens drawn so far (stopped_by_caller), its place and caches freed; one
  // still waiting for a place never starts.
  std::shared_ptr<const std::atomic<bool>> cancelled = nullptr;
};

struct Generation {
  std::vector<int64_t> tokens;  // generated ids
  // When each token was drawn, by the engine's clock (a caller's on_token may see it later).
  std::vector<std::chrono::steady_clock::time_point> token_times;
  bool stopped_at_eos = false;
  bool stopped_by_caller = false;             // on_token returned false
  std::vector<float> prompt_logits;           // [prompt.size() × vocab_size] row-major, when asked
  std::vector<float> step_logits;             // [tokens.size() × vocab_size] row-major, when asked
  std::vector<TokenLogprob> logprobs;         // one per generated token, when asked
  std::vector<TokenLogprob> prompt_logprobs;  // one per prompt token from the second, when asked
};

// What the engine is doing and has done (a server's /metrics): gauges now, totals since open.
struct EngineStats {
  int64_t running = 0;               // sequences in the batch being stepped
  int64_t waiting = 0;               // requests waiting for a place in it
  int64_t steps = 0;                 // forwards run
  int64_t prompt_tokens = 0;         // prompt tokens run through the model
  int64_t cached_prompt_tokens = 0;  // prompt tokens taken from the prefix cache instead
  int64_t prefix_cache_bytes = 0;    // device memory the prefix cache holds now
  int64_t generated_tokens = 0;      // tokens drawn
  int64_t finished = 0;              // sequences that ended (any reason, errors included)
  // Speculative decoding: drafts verified, drafts accepted, and of those the accepted ones by
  // their place among a step's drafts ([i]: the (i+1)-th draft; one entry per drafted place).
  int64_t drafted_tokens = 0;
  int64_t accepted_tokens = 0;
  std::vector<int64_t> drafted_at = {};
  std::vector<int64_t> accepted_at = {};
  // The MTP block's drafting runs (one a step that drafted, for all its sequences) and the time
  // they took on the host's clock (each ends with its drafts on the host, so this is their
  // device time too): a verify step's own cost is a speculative step's less this.
  int64_t draft_runs = 0;
  double draft_seconds = 0;
  // With cuda_graph: the captured steps held (a decode step's one a batch bucket; with
  // speculative_tokens also the verify and draft steps' as their shapes are met), the device
  // memory they hold (their activations, logits and padding rows' cache), and the captures made
  // so far (every decode step's at open); the largest batch a decode graph replays and the
  // memory the graphs held at open (decode_graph_bytes keeps it until a speculative step
  // captures: no decode step does after open).
  int64_t decode_graphs = 0;
  int64_t decode_graph_bytes = 0;
  int64_t decode_graph_captures = 0;
  int64_t decode_graph_planned_batch = 0;
  int64_t decode_graph_planned_bytes = 0;
  // The step size (EngineOptions::max_step_tokens) and, on a GPU, the device memory a step of
  // it was planned to hold at open (runtime/step_memory_plan.h; 0 on the CPU): what open
  // checked was free beside the weights, the decode graphs and the prefix cache.
  int64_t max_step_tokens = 0;
  int64_t step_planned_bytes = 0;
  // Speculative decoding's steps replayed from CUDA graphs so far: verify forwards and MTP
  // draft calls (each draft depth of the batch is one).
  int64_t verify_graph_replays = 0;
  int64_t draft_graph_replays = 0;
};

class Engine {
 public:
  // Loads and validates the checkpoint; every error names the file, tensor or config field.
  static Result<Engine> open(const EngineOptions& options);
  ~Engine();
  Engine(Engine&&) noexcept;
  Engine& operator=(Engine&&) noexcept;

  int64_t vocab_size() const;
  int64_t eos_token_id() const;
  // What loading decided that a user should know: routed experts held in f32 instead of NVFP4,
  // MXFP4 experts converted, the layers whose experts are in host memory.
  const std::vector<std::string>& load_notes() const;

  // The checks generate() makes before it starts (prompt ids in the vocabulary, sampling values,
  // prompt + max_tokens within the context), so a caller can refuse a request before it commits
  // to an answer (a server's streamed response, whose status is sent first).
  Status check(const GenerateRequest& request) const;
  // One sequence: prefill the prompt, then decode with the cache until max_tokens or eos.
  // Thread-safe: concurrent calls (a server's requests) are stepped together, one forward per
  // step for all (continuous batching: a sequence joins at the next step and leaves when done).
  Result<Generation> generate(const GenerateRequest& request);
  // Several sequences of different lengths, joining the running batch in the same step.
  Result<std::vector<Generation>> generate_batch(const std::vector<GenerateRequest>& requests);
  // Thread-safe; the gauges are as of the last step.
  EngineStats stats() const;

 private:
  struct State;
  explicit Engine(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace dsv4

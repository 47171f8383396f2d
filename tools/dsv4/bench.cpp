// dsv4 bench [--model DIR] [--device cpu|cuda] [--experts w4a16|w4a4] [--prompt-tokens N]
// [--gen-tokens M] [--batch B] [--repeats R] [--seed S] [--prefix-cache-mb C] [--shared-prefix P]:
// end-to-end speed of the engine as a user meets it. B sequences of N random prompt ids each
// generate M tokens (greedy, eos ignored, so every run does the same work), R times after one
// warm-up run, new prompts each run; their first P ids are the same in every prompt of every run
// (a system prompt), the rest differ, so with the prefix cache the runs after the first two start
// from the state of those P (kept where the second run's prompts branched off the first's); the
// engine stamps
// each token as it is drawn (Generation::token_times), so the host clock splits a run into
//   time to first token  from generate_batch() to the last sequence's first token (the prefill
//                        of all prompts and one sampling step; with the prefix cache on and
//                        N ≥ 65, the prompts' last tokens run in a step of their own after
//                        the rest, whose state is kept: runtime/batch.h);
//   decode step          from there to the last token, divided by the M − 1 steps (one forward
//                        for all B sequences and their sampling).
// Prints the median over the R runs of both, with the fastest and slowest, and the tokens a
// second they give. A program, not a test: run it on the machine you care about.
// Uses only the public API (include/dsv4/).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "commands.h"
#include "dsv4/engine.h"
#include "engine_flags.h"

namespace dsv4::tools {
namespace {

using Clock = std::chrono::steady_clock;

// The most prompt ids of one run (B × N), so that absurd flags are refused with a message
// rather than failing to allocate (16 M ids: 128 MB of prompts).
constexpr int64_t kMaxPromptIds = int64_t{1} << 24;

struct BenchArgs {
  EngineFlags engine;
  int64_t prompt_tokens = 128;
  int64_t gen_tokens = 32;
  int64_t batch = 1;
  int64_t repeats = 5;
  uint64_t seed = 0;
  int64_t prefix_cache_mb = EngineOptions{}.prefix_cache_mb;
  int64_t shared_prefix = 0;  // P
};

// One run's two figures, in milliseconds.
struct RunTimes {
  double first_token_ms = 0;
  double decode_step_ms = 0;
};

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// B prompts of random ids below the vocabulary size, M greedy tokens each, eos ignored: the
// first P ids the same for all (drawn from the seed alone), the rest new for each run.
std::vector<GenerateRequest> make_requests(const BenchArgs& args, int64_t vocab_size, int64_t run) {
  std::uniform_int_distribution<int64_t> id(0, vocab_size - 1);
  std::mt19937_64 shared(args.seed);
  std::vector<int64_t> start(static_cast<size_t>(args.shared_prefix));
  for (int64_t& t : start) t = id(shared);
  std::mt19937_64 rng(args.seed + 1 + static_cast<uint64_t>(run));
  std::vector<GenerateRequest> requests(static_cast<size_t>(args.batch));
  for (GenerateRequest& r : requests) {
    r.prompt = start;
    r.prompt.resize(static_cast<size_t>(args.prompt_tokens));
    for (size_t i = start.size(); i < r.prompt.size(); ++i) r.prompt[i] = id(rng);
    r.sampling.max_tokens = args.gen_tokens;
    r.sampling.stop_at_eos = false;
  }
  return requests;
}

Result<RunTimes> run_once(Engine& engine, const std::vector<GenerateRequest>& requests) {
  const Clock::time_point start = Clock::now();
  Result<std::vector<Generation>> out = engine.generate_batch(requests);
  if (!out.ok()) return out.status();
  const size_t steps = out->front().token_times.size();
  if (steps < 2 || std::any_of(out->begin(), out->end(), [&](const Generation& g) {
        return g.token_times.size() != steps;
      })) {
    return internal_error("bench: the sequences did not all generate the tokens asked for");
  }
  Clock::time_point first_done = start, all_done = start;
  for (const Generation& g : *out) {
    first_done = std::max(first_done, g.token_times.front());
    all_done = std::max(all_done, g.token_times.back());
  }
  return RunTimes{ms_between(start, first_done),
                  ms_between(first_done, all_done) / static_cast<double>(steps - 1)};
}

// Median (the upper one of an even count), fastest and slowest of one figure over the runs.
struct Spread {
  double median, min, max;
};
Spread spread(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return Spread{v[v.size() / 2], v.front(), v.back()};
}

int fail(const Status& status) {
  std::fprintf(stderr, "dsv4 bench: %s\n", status.to_string().c_str());
  return 1;
}

int run_bench(const BenchArgs& args) {
  if (args.shared_prefix >= args.prompt_tokens) {
    return fail(invalid_argument("--shared-prefix " + std::to_string(args.shared_prefix) +
                                 " must be less than --prompt-tokens " +
                                 std::to_string(args.prompt_tokens)));
  }
  if (args.batch * args.prompt_tokens > kMaxPromptIds) {
    return fail(invalid_argument("--batch " + std::to_string(args.batch) + " × --prompt-tokens " +
                                 std::to_string(args.prompt_tokens) + " is more than " +
                                 std::to_string(kMaxPromptIds) + " prompt ids"));
  }
  EngineOptions options = engine_options(args.engine, "bench");
  options.max_context = args.prompt_tokens + args.gen_tokens;
  options.max_batch = args.batch;  // all B sequences in every step
  options.max_step_tokens = std::max(options.max_step_tokens, args.batch);
  options.prefix_cache_mb = args.prefix_cache_mb;
  Result<Engine> engine = Engine::open(options);
  if (!engine.ok()) return fail(engine.status());
  std::vector<double> first_token, decode_step;
  for (int64_t r = 0; r <= args.repeats; ++r) {  // run 0 warms up (allocations, caches)
    Result<RunTimes> t = run_once(*engine, make_requests(args, engine->vocab_size(), r));
    if (!t.ok()) return fail(t.status());
    if (r == 0) continue;
    first_token.push_back(t->first_token_ms);
    decode_step.push_back(t->decode_step_ms);
  }
  const Spread ttft = spread(first_token), step = spread(decode_step);
  const double b = static_cast<double>(args.batch);
  std::printf(
      "dsv4 bench: %s, %s, experts %s; batch %lld, prompt %lld (shared %lld), generate %lld; "
      "median of %lld runs [fastest, slowest]\n",
      options.model_dir.c_str(), args.engine.device.c_str(), args.engine.experts.c_str(),
      static_cast<long long>(args.batch), static_cast<long long>(args.prompt_tokens),
      static_cast<long long>(args.shared_prefix), static_cast<long long>(args.gen_tokens),
      static_cast<long long>(args.repeats));
  std::printf("time to first token: %.3f ms [%.3f, %.3f]  prefill %.1f tokens/s\n", ttft.median,
              ttft.min, ttft.max, b * static_cast<double>(args.prompt_tokens) * 1e3 / ttft.median);
  std::printf("decode step:         %.3f ms [%.3f, %.3f]  %.1f tokens/s (%.1f a sequence)\n",
              step.median, step.min, step.max, b * 1e3 / step.median, 1e3 / step.median);
  const EngineStats stats = engine->stats();
  std::printf("prefix cache:        %lld of %lld prompt tokens taken from kept states (all runs)\n",
              static_cast<long long>(stats.cached_prompt_tokens),
              static_cast<long long>(stats.cached_prompt_tokens + stats.prompt_tokens));
  return 0;
}

}  // namespace

void register_bench(CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "bench", "Time to first token and decode step of random prompts, end to end");
  auto args = std::make_shared<BenchArgs>();
  add_engine_flags(cmd, args->engine, /*model_required=*/false);
  cmd->add_option("--prompt-tokens", args->prompt_tokens, "prompt length of each sequence")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cmd->add_option("--gen-tokens", args->gen_tokens,
                  "tokens each sequence generates (at least 2: one decode step)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{2}, int64_t{1} << 20));
  cmd->add_option("--batch", args->batch, "sequences stepped together")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{4096}));
  cmd->add_option("--repeats", args->repeats, "timed runs after one warm-up run")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  cmd->add_option("--seed", args->seed, "seed of the random prompts")->capture_default_str();
  add_prefix_cache_flag(cmd, args->prefix_cache_mb);
  cmd->add_option("--shared-prefix", args->shared_prefix,
                  "the first P prompt ids are the same in every prompt of every run")
      ->capture_default_str()
      ->check(non_negative());
  cmd->callback([args, &exit_code] { exit_code = run_bench(*args); });
}

}  // namespace dsv4::tools

// dsv4 bench [--model DIR] [--device cpu|cuda] [--experts w4a16|w4a4] [--prompt-tokens N]
// [--gen-tokens M] [--batch B[,B2..]] [--repeats R] [--seed S] [--prefix-cache-mb C]
// [--shared-prefix P] [--join-prompt-tokens L] [--json-schema FILE]:
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
// With L > 0, once the first sequence has its first token a request with a prompt of L random
// ids joins the batch (continuous batching feeds it in chunks beside the B decode rows), and two
// more figures come from the same clock:
//   decode beside a prefill  the B sequences' steps that ran that prompt (from its arrival to
//                        its first token), averaged;
//   joining prefill      from its arrival to its first token.
// (The decode step above then includes the steps beside that prefill.)
// With --speculative k a step emits 1 to k + 1 tokens of a sequence: the decode step is then
// the time a token, and two last lines give how many drafts were accepted, by draft position
// (all runs, warm-up included), the tokens a verify step emitted, the MTP block's drafting time
// a step, and, with --speculate-always (every step speculates; by default the batch speculates
// only where its measured step times say it pays: runtime/speculation_policy.h), a speculative
// step's time (the decode step's median times the tokens a step) split into the verify forward
// of k + 1 tokens a sequence and the drafting. On a checkpoint whose drafts are never kept
// (random weights) a step emits one token, so the verify forward there is the cost to hold
// against a plain decode step.
// With --json-schema FILE every run is made twice, one after the other on the same engine: as
// above, then with each sequence held to the JSON Schema in FILE (compiled against the
// checkpoint's tokenizer.json as the server compiles a response_format; its masks made on the
// engine's helper thread during each forward, as for the server's requests) on new prompts; the
// constrained runs' figures follow under their own heading, then the decode step's ratio of the
// two (the median of the runs' pairs) and how many documents were complete (drawn eos) within
// the M tokens, with the first sequence's text. Both ignore eos, so both do M steps; past a
// complete document only eos may come, whose mask costs nothing, so a schema whose documents
// outlast M (bench/grammar/order_schema.json does at M = 128 on the embedded model) is the fair
// measure. The speculative lines then count both kinds of runs.
// Prints the median over the R runs of each, with the fastest and slowest, and the tokens a
// second they give. Several batch sizes run one after the other on one engine (loaded once;
// its batch and step limits fit the largest), each with its own warm-up run and lines. A program,
// not a test: run it on the machine you care about. Uses only the public API (include/dsv4/).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "acceptance.h"
#include "bench_schema.h"
#include "commands.h"
#include "dsv4/engine.h"
#include "dsv4/structured_output.h"
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
  std::vector<int64_t> batches = {1};  // --batch: each in turn, on one open engine
  int64_t batch = 1;                   // the one running
  int64_t repeats = 5;
  uint64_t seed = 0;
  int64_t prefix_cache_mb = EngineOptions{}.prefix_cache_mb;
  int64_t shared_prefix = 0;       // P
  int64_t join_prompt_tokens = 0;  // L
  bool speculate_always = false;   // EngineOptions::speculate_always
  std::string json_schema;         // --json-schema FILE: empty, none
};

// One run's figures, in milliseconds (the last two with a joining prompt only).
struct RunTimes {
  double first_token_ms = 0;
  double decode_step_ms = 0;
  double decode_beside_prefill_ms = 0;
  double joining_prefill_ms = 0;
};

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// B prompts of random ids below the vocabulary size, M greedy tokens each, eos ignored, held to
// `constraint` (null: free): the first P ids the same for all (drawn from the seed alone), the
// rest new for each run.
std::vector<GenerateRequest> make_requests(const BenchArgs& args, int64_t vocab_size, int64_t run,
                                           std::shared_ptr<const TokenConstraint> constraint) {
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
    r.sampling.constraint = constraint;
  }
  return requests;
}

// One request of L random ids (a new prompt each run) and one token.
GenerateRequest joining_request(const BenchArgs& args, int64_t vocab_size, int64_t run) {
  std::uniform_int_distribution<int64_t> id(0, vocab_size - 1);
  std::mt19937_64 rng(args.seed ^ (0x9e3779b97f4a7c15ull + static_cast<uint64_t>(run)));
  GenerateRequest r;
  r.prompt.resize(static_cast<size_t>(args.join_prompt_tokens));
  for (int64_t& t : r.prompt) t = id(rng);
  r.sampling.max_tokens = 1;
  return r;
}

// The mean gap between consecutive tokens of `out` that began after `from` and lies mostly
// before `to`: the steps that ran the joining prompt. (The tokens of one step are stamped in
// some order, so the step that finished the prompt may end a little before or after `to`.)
std::optional<double> mean_gap_ms(const std::vector<Generation>& out, Clock::time_point from,
                                  Clock::time_point to) {
  double sum = 0;
  int64_t n = 0;
  for (const Generation& g : out) {
    for (size_t i = 1; i < g.token_times.size(); ++i) {
      const Clock::time_point begin = g.token_times[i - 1], end = g.token_times[i];
      if (begin < from || std::min(end, to) - begin < (end - begin) / 2) continue;
      sum += ms_between(begin, end);
      ++n;
    }
  }
  if (n == 0) return std::nullopt;
  return sum / static_cast<double>(n);
}

// The batch's requests, and with a joining request, that one sent once the first sequence has
// its first token (its on_token, on the batch's thread, releases this one).
Result<std::vector<Generation>> generate_run(Engine& engine, std::vector<GenerateRequest> requests,
                                             const std::optional<GenerateRequest>& joining,
                                             RunTimes& times) {
  if (!joining) return engine.generate_batch(requests);
  std::promise<void> first_token;
  requests.front().on_token = [&first_token, sent = false](int64_t) mutable {
    if (!sent) first_token.set_value();
    sent = true;
    return true;
  };
  auto batch = std::async(std::launch::async, [&] { return engine.generate_batch(requests); });
  const std::future<void> first = first_token.get_future();
  while (first.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) {
    if (batch.wait_for(std::chrono::seconds(0)) != std::future_status::ready) continue;
    Result<std::vector<Generation>> out = batch.get();  // ended without a token: an error
    return out.ok() ? internal_error("bench: the batch ended before its first token")
                    : out.status();
  }
  const Clock::time_point arrival = Clock::now();
  Result<Generation> joined = engine.generate(*joining);
  Result<std::vector<Generation>> out = batch.get();
  if (!joined.ok()) return joined.status();
  if (!out.ok()) return out.status();
  const Clock::time_point prefilled = joined->token_times.front();
  const std::optional<double> gap = mean_gap_ms(*out, arrival, prefilled);
  if (!gap) {
    return invalid_argument(
        "bench: no decode step fell inside the joining prompt's prefill; "
        "give more --gen-tokens");
  }
  times.decode_beside_prefill_ms = *gap;
  times.joining_prefill_ms = ms_between(arrival, prefilled);
  return out;
}

// One run's figures; `out` gets what the sequences generated.
Result<RunTimes> run_once(Engine& engine, const std::vector<GenerateRequest>& requests,
                          const std::optional<GenerateRequest>& joining,
                          std::vector<Generation>& generated) {
  RunTimes times;
  const Clock::time_point start = Clock::now();
  Result<std::vector<Generation>> out = generate_run(engine, requests, joining, times);
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
  times.first_token_ms = ms_between(start, first_done);
  times.decode_step_ms = ms_between(first_done, all_done) / static_cast<double>(steps - 1);
  generated = std::move(out).value();
  return times;
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

// What the engine counted since `before`: one batch size's runs.
EngineStats since(EngineStats now, const EngineStats& before) {
  now.prompt_tokens -= before.prompt_tokens;
  now.cached_prompt_tokens -= before.cached_prompt_tokens;
  now.drafted_tokens -= before.drafted_tokens;
  now.accepted_tokens -= before.accepted_tokens;
  for (size_t i = 0; i < before.drafted_at.size() && i < now.drafted_at.size(); ++i) {
    now.drafted_at[i] -= before.drafted_at[i];
    now.accepted_at[i] -= before.accepted_at[i];
  }
  now.draft_runs -= before.draft_runs;
  now.draft_seconds -= before.draft_seconds;
  return now;
}

// Each figure of one kind of run (free or held to the schema), over the timed runs.
struct Figures {
  std::vector<double> first_token, decode_step, beside_prefill, joining_prefill;
  void add(const RunTimes& t) {
    first_token.push_back(t.first_token_ms);
    decode_step.push_back(t.decode_step_ms);
    beside_prefill.push_back(t.decode_beside_prefill_ms);
    joining_prefill.push_back(t.joining_prefill_ms);
  }
};

void print_figures(const Figures& f, const BenchArgs& args) {
  const Spread ttft = spread(f.first_token), step = spread(f.decode_step);
  const double b = static_cast<double>(args.batch);
  std::printf("time to first token: %.3f ms [%.3f, %.3f]  prefill %.1f tokens/s\n", ttft.median,
              ttft.min, ttft.max, b * static_cast<double>(args.prompt_tokens) * 1e3 / ttft.median);
  std::printf("decode step:         %.3f ms [%.3f, %.3f]  %.1f tokens/s (%.1f a sequence)\n",
              step.median, step.min, step.max, b * 1e3 / step.median, 1e3 / step.median);
  if (args.join_prompt_tokens > 0) {
    const Spread beside = spread(f.beside_prefill), joined = spread(f.joining_prefill);
    std::printf("decode beside a prefill: %.3f ms [%.3f, %.3f]  (a %lld-token prompt joining)\n",
                beside.median, beside.min, beside.max,
                static_cast<long long>(args.join_prompt_tokens));
    std::printf("joining prefill:     %.3f ms [%.3f, %.3f]  %.1f tokens/s\n", joined.median,
                joined.min, joined.max,
                static_cast<double>(args.join_prompt_tokens) * 1e3 / joined.median);
  }
}

// The constrained runs' lines: their figures, the decode step's cost of the schema (each
// constrained run against the free run just before it, so a drift of the machine's speed
// cancels) and what the sequences of the last run wrote.
void print_schema_figures(const Figures& free, const Figures& held, const BenchArgs& args,
                          const BenchSchema& schema, const std::vector<Generation>& last,
                          int64_t eos_token_id) {
  std::printf("with --json-schema %s:\n", schema.path.c_str());
  print_figures(held, args);
  std::vector<double> ratio;
  for (size_t i = 0; i < held.decode_step.size(); ++i) {
    ratio.push_back(held.decode_step[i] / free.decode_step[i]);
  }
  const Spread r = spread(ratio);
  std::printf("schema's decode step: %.3f × the free one [%.3f, %.3f] (%+.1f %%, pairs of runs)\n",
              r.median, r.min, r.max, (r.median - 1) * 100);
  std::printf("schema's documents:  %s\n",
              describe_documents(last, schema.tokenizer, eos_token_id).c_str());
}

// One batch size's runs on the open engine, and their lines; with a schema, each free run is
// followed by a constrained one on prompts of their own.
Status bench_batch(Engine& engine, const BenchArgs& args, const EngineOptions& options,
                   const BenchSchema* schema, std::shared_ptr<const TokenConstraint> constraint) {
  const EngineStats before = engine.stats();
  Figures free, held;
  std::vector<Generation> out;
  for (int64_t r = 0; r <= args.repeats; ++r) {  // run 0 warms up (allocations, caches)
    std::optional<GenerateRequest> joining;
    if (args.join_prompt_tokens > 0) joining = joining_request(args, engine.vocab_size(), r);
    DSV4_ASSIGN_OR_RETURN(
        RunTimes t,
        run_once(engine, make_requests(args, engine.vocab_size(), r, nullptr), joining, out));
    if (r > 0) free.add(t);
    if (!constraint) continue;
    const int64_t run = args.repeats + 1 + r;
    if (args.join_prompt_tokens > 0) joining = joining_request(args, engine.vocab_size(), run);
    DSV4_ASSIGN_OR_RETURN(
        t,
        run_once(engine, make_requests(args, engine.vocab_size(), run, constraint), joining, out));
    if (r > 0) held.add(t);
  }
  std::printf(
      "dsv4 bench: %s, %s, numerics %s, experts %s; batch %lld, prompt %lld (shared %lld), "
      "generate %lld; median of %lld runs [fastest, slowest]\n",
      options.model_dir.c_str(), args.engine.device.c_str(), numerics_name(options.numerics),
      args.engine.experts.c_str(), static_cast<long long>(args.batch),
      static_cast<long long>(args.prompt_tokens), static_cast<long long>(args.shared_prefix),
      static_cast<long long>(args.gen_tokens), static_cast<long long>(args.repeats));
  print_figures(free, args);
  if (constraint) {
    print_schema_figures(free, held, args, *schema, out, engine.eos_token_id());
  }
  const EngineStats stats = since(engine.stats(), before);
  std::printf("prefix cache:        %lld of %lld prompt tokens taken from kept states (all runs)\n",
              static_cast<long long>(stats.cached_prompt_tokens),
              static_cast<long long>(stats.cached_prompt_tokens + stats.prompt_tokens));
  if (options.speculative_tokens > 0) {
    std::printf("speculative:         %s\n", describe_acceptance(stats).c_str());
  }
  if (options.speculative_tokens > 0 && options.speculate_always) {
    // A step of the batch emits tokens_a_verify_step tokens of each sequence: its time is that
    // many decode steps (ms a token), of which the drafting run is the MTP block's share.
    const double step_ms = spread(free.decode_step).median * tokens_a_verify_step(stats);
    const double draft_ms = stats.draft_runs > 0
                                ? 1e3 * stats.draft_seconds / static_cast<double>(stats.draft_runs)
                                : 0;
    std::printf("speculative step:    %.3f ms = verify %.3f + drafting %.3f\n", step_ms,
                step_ms - draft_ms, draft_ms);
  }
  std::fflush(stdout);
  return ok_status();
}

int run_bench(BenchArgs args) {
  if (args.shared_prefix >= args.prompt_tokens) {
    return fail(invalid_argument("--shared-prefix " + std::to_string(args.shared_prefix) +
                                 " must be less than --prompt-tokens " +
                                 std::to_string(args.prompt_tokens)));
  }
  const int64_t max_batch = *std::max_element(args.batches.begin(), args.batches.end());
  if (max_batch * args.prompt_tokens > kMaxPromptIds) {
    return fail(invalid_argument("--batch " + std::to_string(max_batch) + " × --prompt-tokens " +
                                 std::to_string(args.prompt_tokens) + " is more than " +
                                 std::to_string(kMaxPromptIds) + " prompt ids"));
  }
  EngineOptions options = engine_options(args.engine, "bench");
  // With a schema, the tokenizer's undecodable ids are never drawn, free or held, as in the
  // server: the two kinds of runs differ by the schema alone.
  std::optional<BenchSchema> schema;
  if (!args.json_schema.empty()) {
    Result<BenchSchema> read = read_bench_schema(args.json_schema, options.model_dir);
    if (!read.ok()) return fail(read.status());
    schema.emplace(std::move(read).value());
    options.decodable = [&tok = schema->tokenizer](int64_t id) { return tok.decode({id}).ok(); };
  }
  options.max_context = std::max(args.prompt_tokens + args.gen_tokens, args.join_prompt_tokens + 1);
  options.max_batch = max_batch + (args.join_prompt_tokens > 0 ? 1 : 0);  // all in every step
  // Without --max-step-tokens, at least the batch (every sequence decodes a token a step); one
  // asked for is the engine's to check against it.
  if (args.engine.max_step_tokens == 0) {
    options.max_step_tokens = std::max(options.max_step_tokens, options.max_batch);
  }
  options.prefix_cache_mb = args.prefix_cache_mb;
  options.speculate_always = args.speculate_always;
  Result<Engine> engine = open_engine(options, "bench");
  if (!engine.ok()) return fail(engine.status());
  std::shared_ptr<const TokenConstraint> constraint;
  if (schema) {
    Result<std::shared_ptr<const TokenConstraint>> compiled =
        compile_bench_schema(*schema, *engine);
    if (!compiled.ok()) return fail(compiled.status());
    constraint = std::move(compiled).value();
  }
  for (const int64_t batch : args.batches) {
    args.batch = batch;
    const Status done =
        bench_batch(*engine, args, options, schema ? &*schema : nullptr, constraint);
    if (!done.ok()) return fail(done);
  }
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
  cmd->add_option("--batch", args->batches,
                  "sequences stepped together; a list (1,8,32) runs each in turn on one engine")
      ->delimiter(',')
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
  cmd->add_option("--join-prompt-tokens", args->join_prompt_tokens,
                  "a prompt of L ids joins once the batch decodes (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd->add_flag("--speculate-always", args->speculate_always,
                "with --speculative: draft in every step, even where it does not pay (to time the "
                "verify step)");
  cmd->add_option("--json-schema", args->json_schema,
                  "also time every run with each sequence held to this JSON Schema (a file, as "
                  "response_format's json_schema.schema), beside the free runs");
  cmd->callback([args, &exit_code] { exit_code = run_bench(*args); });
}

}  // namespace dsv4::tools

// The Engine on the GPU (label cuda): loaded layer by layer onto the device (load_model_on), its
// forwards on the scheduler's worker thread, callers on threads of their own. Every oracle prompt
// of tiny_e, asked twice and all at once, must come out as transformers' cached greedy
// continuation (the CUDA forward matches transformers within kGoldenLogitsRelTol, and its greedy
// tokens exactly: tests/model/deepseek_v4_cuda_test.cpp). The prefix cache's states copied on
// the device serve a chat's next turn as they do on the host (runtime/prefix_turns.h).
// Speculative decoding keeps plain decoding's greedy tokens, every step speculative or beside
// plain steps replayed from CUDA graphs, and with its own steps replayed from CUDA graphs. With
// CUDA graphs, open captures every decode step a request will replay, expert offload or not.
// A prompt that asks every row's logits takes them in host memory, the head writing them a
// 256-row device slab at a time (runtime/session.cpp), as the CPU computes them.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "dsv4/engine.h"
#include "runtime/golden_cases.h"
#include "runtime/prefix_turns.h"
#include "testing/compare.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4 {
namespace {

TEST(EngineCudaTest, ConcurrentCallersGetTransformersGreedyTokens) {
  EngineOptions options;
  options.model_dir = testing::golden_path("tiny_e_pretrained/model");
  options.device = EngineDevice::kCuda;
  options.max_context = 128;
  Result<Engine> engine = Engine::open(options);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  const std::vector<testing::GoldenCase> cases = testing::golden_cases("tiny_e_pretrained");
  std::vector<Result<Generation>> got(2 * cases.size(), internal_error("not run"));
  std::vector<std::thread> callers;
  for (size_t i = 0; i < got.size(); ++i) {
    callers.emplace_back([&, i] {
      GenerateRequest r{cases[i % cases.size()].prompt, {}};
      r.sampling.max_tokens = 20;
      got[i] = engine->generate(r);
    });
  }
  for (std::thread& t : callers) t.join();
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(got[i].ok()) << i << ": " << got[i].status().to_string();
    EXPECT_EQ(got[i]->tokens, cases[i % cases.size()].greedy) << "caller " << i;
  }
}

// 600 rows in one chunk: three slabs, the last a partial one.
TEST(EngineCudaTest, PromptLogitsComeThroughTheHostSlabsAsTheCpuComputesThem) {
  EngineOptions options;
  options.model_dir = testing::golden_path("tiny_e_pretrained/model");
  options.max_context = 1024;
  options.max_step_tokens = 1024;
  Result<Engine> cpu = Engine::open(options);
  options.device = EngineDevice::kCuda;
  Result<Engine> cuda = Engine::open(options);
  ASSERT_TRUE(cpu.ok()) << cpu.status().to_string();
  ASSERT_TRUE(cuda.ok()) << cuda.status().to_string();
  testing::SeededRng rng;
  GenerateRequest r;
  r.prompt.resize(600);
  for (int64_t& id : r.prompt) id = rng.uniform_int(0, cpu->vocab_size() - 1);
  r.sampling.max_tokens = 1;
  r.return_prompt_logits = true;
  const Result<Generation> want = cpu->generate(r);
  const Result<Generation> got = cuda->generate(r);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  const int64_t v = cpu->vocab_size();
  ASSERT_EQ(want->prompt_logits.size(), static_cast<size_t>(600 * v));
  ASSERT_EQ(got->prompt_logits.size(), want->prompt_logits.size());
  EXPECT_LT(
      testing::max_row_rel_error(got->prompt_logits.data(), want->prompt_logits.data(), 600, v),
      2 * testing::kGoldenLogitsRelTol);  // each within kGoldenLogitsRelTol of transformers
}

TEST(EngineCudaTest, TurnsStartFromKeptStates) {
  testing::expect_turns_start_from_kept_states(EngineDevice::kCuda);
}

// The trained Brown model (whose drafts are often kept, so speculative steps accept and
// reject) on the GPU, at a context of 256.
Result<Engine> open_brown(EngineOptions options) {
  options.model_dir = testing::golden_path("brown_small/model");
  options.device = EngineDevice::kCuda;
  options.max_context = 256;
  return Engine::open(options);
}

// Greedy generations of n sequences of `engine`, with its stats once they are done.
std::pair<std::vector<Generation>, EngineStats> brown_generations(Engine& engine, int64_t n) {
  std::vector<GenerateRequest> requests;
  for (int64_t i = 0; i < n; ++i) {
    GenerateRequest r;
    for (int64_t t = 0; t < 5 + 7 * i; ++t) r.prompt.push_back((37 * t + 11 * i + 3) % 4000 + 2);
    r.sampling.max_tokens = 80;
    r.sampling.stop_at_eos = false;
    requests.push_back(std::move(r));
  }
  Result<std::vector<Generation>> out = engine.generate_batch(requests);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return {};
  return std::make_pair(std::move(out).value(), engine.stats());
}

// Greedy generations of n sequences of the Brown model opened with `options`, with its stats.
std::pair<std::vector<Generation>, EngineStats> brown_batch(const EngineOptions& options,
                                                            int64_t n) {
  Result<Engine> engine = open_brown(options);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  if (!engine.ok()) return {};
  return brown_generations(*engine, n);
}

void expect_same_tokens(const std::vector<Generation>& got, const std::vector<Generation>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "sequence " << i;
  }
}

// Speculative decoding on the GPU: a batch of sequences verifies its drafts in one forward, each
// sequence's token and drafts as the batch's decode rows, and rolls the rejected ones back; its
// greedy tokens must be those of plain decoding on the same device, at k = 1 and 4.
TEST(EngineCudaTest, SpeculativeBatchesKeepThePlainGreedyTokens) {
  const auto [plain, plain_stats] = brown_batch(EngineOptions{}, 8);
  for (const int64_t k : {int64_t{1}, int64_t{4}}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    EngineOptions options;
    options.speculative_tokens = k;
    options.speculate_always = true;
    const auto [spec, stats] = brown_batch(options, 8);
    expect_same_tokens(spec, plain);
    EXPECT_GT(stats.accepted_tokens, 0);
    EXPECT_LT(stats.accepted_tokens, stats.drafted_tokens);
  }
}

// Speculation beside CUDA graphs: where the batch's step times make a step plain (speculate_always
// off: both kinds run while it measures them), that decode step is replayed from its graph, the
// speculative ones run op by op, and the MTP cache skips the graph steps' positions when drafting
// resumes. The greedy tokens stay those of plain eager decoding.
TEST(EngineCudaTest, SpeculationBesideGraphStepsKeepsThePlainGreedyTokens) {
  EngineOptions options;
  options.max_batch = 2;
  const auto [plain, plain_stats] = brown_batch(options, 2);
  options.speculative_tokens = 2;
  options.speculate_always = false;
  options.cuda_graph = true;
  const auto [spec, stats] = brown_batch(options, 2);
  expect_same_tokens(spec, plain);
  EXPECT_GT(stats.decode_graphs, 0);
  EXPECT_GE(stats.decode_graph_captures, stats.decode_graphs);
  EXPECT_GT(stats.drafted_tokens, 0);
}

// --cuda-graph on: open captures a graph for every bucket of max_batch (1, 2, 4) at max_context
// before any request, and its stats (what /metrics prints) show them held with their memory.
// Three sequences then decode as the bucket of 4 with the greedy tokens of plain eager decoding
// (every expert on the device), and no request captures: the graphs and their memory stay as
// open left them. With `offloaded_layers` (--expert-offload), the routed experts of that many
// last layers are in host memory, each decode step copying those it touches inside its graph
// (runtime/offloaded_experts.h): the same holds, no size left eager.
void expect_planned_graphs_serve_requests(int64_t offloaded_layers) {
  EngineOptions options;
  options.max_batch = 4;
  const auto [plain, plain_stats] = brown_batch(options, 3);
  options.cuda_graph = true;
  if (offloaded_layers > 0) options.expert_offload_layers = offloaded_layers;
  Result<Engine> engine = open_brown(options);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  const EngineStats opened = engine->stats();
  EXPECT_EQ(opened.decode_graphs, 3);
  EXPECT_EQ(opened.decode_graph_captures, 3);
  EXPECT_EQ(opened.decode_graph_planned_batch, 4);
  EXPECT_GT(opened.decode_graph_planned_bytes, 0);
  EXPECT_EQ(opened.decode_graph_bytes, opened.decode_graph_planned_bytes);
  const std::vector<std::string>& notes = engine->load_notes();
  EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& note) {
    return note.starts_with("decode graphs of 1, 2, 4 rows captured at a context of 256") &&
           note.find("without a CUDA graph") == std::string::npos;
  })) << "no note of the plan, or a size left eager";
  const std::string offload_note =
      "expert offload: the NVFP4 routed experts of " + std::to_string(offloaded_layers) + " layers";
  EXPECT_EQ(std::any_of(notes.begin(), notes.end(),
                        [&](const std::string& note) { return note.starts_with(offload_note); }),
            offloaded_layers > 0)
      << "the load notes do not say that the experts of " << offloaded_layers
      << " layers are in host memory";
  const auto [replayed, stats] = brown_generations(*engine, 3);
  expect_same_tokens(replayed, plain);
  EXPECT_EQ(stats.decode_graphs, opened.decode_graphs);
  EXPECT_EQ(stats.decode_graph_captures, opened.decode_graph_captures);
  EXPECT_EQ(stats.decode_graph_bytes, opened.decode_graph_planned_bytes);
  EXPECT_EQ(stats.decode_graph_planned_bytes, opened.decode_graph_planned_bytes);
}

TEST(EngineCudaTest, DecodeGraphsArePlannedAtOpenAndRequestsCaptureNothing) {
  expect_planned_graphs_serve_requests(/*offloaded_layers=*/0);
}

// brown_small has 4 layers: layers 2 and 3 offloaded, 0 and 1 on the device.
TEST(EngineCudaTest, DecodeGraphsWithOffloadedExpertsArePlannedAndKeepThePlainGreedyTokens) {
  expect_planned_graphs_serve_requests(/*offloaded_layers=*/2);
}

// Speculative steps replayed from CUDA graphs (every step speculative: a sequence's verify
// forwards and MTP draft calls, captured once for their rows and replayed) keep plain eager
// decoding's greedy tokens on the trained Brown model, whose drafts are often kept, so verify
// steps keep 0 … k drafts and draft steps run over 1 … k + 1 rows; one sequence, then two.
TEST(EngineCudaTest, SpeculativeStepsReplayedFromGraphsKeepThePlainGreedyTokens) {
  for (const int64_t n : {int64_t{1}, int64_t{2}}) {
    EngineOptions plain_options;
    plain_options.max_batch = 2;
    const auto [plain, plain_stats] = brown_batch(plain_options, n);
    for (const int64_t k : {int64_t{1}, int64_t{2}}) {
      SCOPED_TRACE(std::to_string(n) + " sequences, k = " + std::to_string(k));
      EngineOptions options = plain_options;
      options.speculative_tokens = k;
      options.speculate_always = true;
      options.cuda_graph = true;
      const auto [spec, stats] = brown_batch(options, n);
      expect_same_tokens(spec, plain);
      EXPECT_GT(stats.accepted_tokens, 0);
      EXPECT_GT(stats.verify_graph_replays, 0);
      EXPECT_GT(stats.draft_graph_replays, 0);
    }
  }
}

}  // namespace
}  // namespace dsv4

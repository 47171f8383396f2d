// The Engine on the GPU (label cuda): loaded layer by layer onto the device (load_model_on), its
// forwards on the scheduler's worker thread, callers on threads of their own. Every oracle prompt
// of tiny_e, asked twice and all at once, must come out as transformers' cached greedy
// continuation (the CUDA forward matches transformers within kGoldenLogitsRelTol, and its greedy
// tokens exactly: tests/model/deepseek_v4_cuda_test.cpp). The prefix cache's states copied on
// the device serve a chat's next turn as they do on the host (runtime/prefix_turns.h).
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "dsv4/engine.h"
#include "runtime/golden_cases.h"
#include "runtime/prefix_turns.h"

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

TEST(EngineCudaTest, TurnsStartFromKeptStates) {
  testing::expect_turns_start_from_kept_states(EngineDevice::kCuda);
}

}  // namespace
}  // namespace dsv4

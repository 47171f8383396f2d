// The prefix cache through the public Engine, on either device: a chat's second turn and the
// same prompt again start from kept states (EngineStats::cached_prompt_tokens says how many
// tokens they skipped) and give the tokens, and the logits within the oracle bar, of an engine
// without the cache.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "dsv4/engine.h"
#include "model/golden.h"
#include "testing/compare.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4::testing {

inline Engine open_tiny_b(EngineDevice device, int64_t prefix_cache_mb) {
  EngineOptions options;
  options.model_dir = golden_path("tiny_b_state_dict/model");
  options.device = device;
  options.max_context = 256;
  options.prefix_cache_mb = prefix_cache_mb;
  Result<Engine> engine = Engine::open(options);
  EXPECT_TRUE(engine.ok()) << engine.status().to_string();
  return std::move(engine).value();
}

inline void expect_turns_start_from_kept_states(EngineDevice device) {
  Engine cached = open_tiny_b(device, 64), uncached = open_tiny_b(device, 0);
  SeededRng rng;
  const auto random_tokens = [&](int64_t n) {
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (int64_t& id : ids) id = rng.uniform_int(0, cached.vocab_size() - 1);
    return ids;
  };
  const auto both = [&](const std::vector<int64_t>& prompt) {
    GenerateRequest r{prompt, {.max_tokens = 5, .stop_at_eos = false}};
    r.return_step_logits = true;
    Result<Generation> a = cached.generate(r), b = uncached.generate(r);
    EXPECT_TRUE(a.ok() && b.ok());
    if (!a.ok() || !b.ok()) return Generation{};
    EXPECT_EQ(a->tokens, b->tokens);
    EXPECT_LT(
        max_row_rel_error(a->step_logits.data(), b->step_logits.data(), 5, cached.vocab_size()),
        kGoldenLogitsRelTol);
    return std::move(a).value();
  };

  const std::vector<int64_t> prompt = random_tokens(70);
  const Generation first = both(prompt);
  EXPECT_EQ(cached.stats().cached_prompt_tokens, 0);
  EXPECT_GT(cached.stats().prefix_cache_bytes, 0);
  std::vector<int64_t> second_turn = prompt;
  second_turn.insert(second_turn.end(), first.tokens.begin(), first.tokens.end());
  const std::vector<int64_t> more = random_tokens(3);
  second_turn.insert(second_turn.end(), more.begin(), more.end());
  both(second_turn);
  EXPECT_EQ(cached.stats().cached_prompt_tokens, 74) << "the first turn's prompt and reply";
  EXPECT_EQ(both(prompt).tokens, first.tokens);
  EXPECT_EQ(cached.stats().cached_prompt_tokens, 74 + 69) << "the prompt but its last token";
  EXPECT_EQ(uncached.stats().cached_prompt_tokens, 0);
  EXPECT_EQ(uncached.stats().prefix_cache_bytes, 0);
}

}  // namespace dsv4::testing

// The running batch with speculative decoding (runtime/batch.h) on a golden model with a random
// MTP block (tests/model/mtp_fixture.h), on the host or, its weights copied there, on the GPU:
// requests through one batch, all admitted at once, prompts in chunks beside the decode steps.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/loader.h"
#include "checkpoint/to_device.h"
#include "model/mtp_fixture.h"
#include "runtime/batch.h"
#include "runtime/speculative.h"

namespace dsv4::runtime {

inline constexpr int64_t kPrefixCacheBytes = int64_t{64} << 20;

struct BatchRun {
  std::vector<Result<Generation>> results;
  EngineStats totals;
};

class SpeculativeBatchFixture : public ::testing::TestWithParam<std::string> {
 protected:
  // The golden model GetParam() with a random MTP block, its weights on `device`, run with
  // `options`.
  void load(Device device, model::ModelOptions options = {}) {
    loaded_ = testing::load_with_mtp_block(GetParam(), rng_);
    ASSERT_EQ(loaded_.weights.mtp.size(), 1u);
    const checkpoint::ModelWeights* weights = &loaded_.weights;
    if (device != Device::kCpu) {
      Result<checkpoint::ModelWeights> copied = checkpoint::copy_weights(loaded_.weights, device);
      ASSERT_TRUE(copied.ok()) << copied.status().to_string();
      device_weights_ = std::move(copied).value();
      weights = &device_weights_;
    }
    model_ = std::make_unique<model::Model>(*weights, options);
  }
  const checkpoint::ModelConfig& c() const { return model_->config(); }

  // Enough tokens to cross every compressor's pool steps twice and the window's wrap-around.
  int64_t long_generation() const {
    int64_t span = c().sliding_window;
    for (const checkpoint::LayerSchedule& s : c().layers) span = std::max(span, s.compress_ratio);
    return 2 * span + 5;
  }

  std::vector<int64_t> random_prompt(int64_t n) {
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (int64_t& id : ids) id = rng_.uniform_int(0, c().vocab_size - 1);
    return ids;
  }

  // Every request through one batch (speculative_tokens k), all admitted at once; step_tokens
  // small, so prompts run in chunks beside the decode steps.
  BatchRun run(const std::vector<GenerateRequest>& requests, int64_t k,
               RunningBatch* batch = nullptr) {
    std::optional<RunningBatch> own;
    if (batch == nullptr) {
      own.emplace(*model_, c().eos_token_id, 16, kPrefixCacheBytes, k);
      batch = &*own;
    }
    std::vector<std::optional<Result<Generation>>> out(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      const Status admitted =
          batch->admit(requests[i], [&out, i](Result<Generation> r) { out[i] = std::move(r); });
      EXPECT_TRUE(admitted.ok()) << admitted.to_string();
    }
    for (int s = 0; s < 10000 && !batch->empty(); ++s) batch->step();
    EXPECT_TRUE(batch->empty());
    BatchRun r{{}, batch->totals()};
    for (auto& o : out) {
      r.results.push_back(o ? std::move(*o) : Result<Generation>(internal_error("not done")));
    }
    return r;
  }

  // Greedy requests of prompts of 3, 17 and 40 tokens, each a long_generation().
  std::vector<GenerateRequest> long_greedy_requests();

  // Runs `requests` plainly, then with k = 1 and kMaxSpeculativeTokens: the same tokens, the
  // same count, and some drafts. `more`, when given, checks each speculative run further.
  void expect_plain_tokens(
      const std::vector<GenerateRequest>& requests,
      const std::function<void(const BatchRun& plain, const BatchRun& spec)>& more = nullptr) {
    const BatchRun plain = run(requests, 0);
    for (int64_t k : {int64_t{1}, kMaxSpeculativeTokens}) {
      SCOPED_TRACE("k = " + std::to_string(k));
      const BatchRun spec = run(requests, k);
      for (size_t i = 0; i < requests.size(); ++i) {
        ASSERT_TRUE(plain.results[i].ok() && spec.results[i].ok()) << i;
        EXPECT_EQ(spec.results[i]->tokens, plain.results[i]->tokens) << "sequence " << i;
      }
      EXPECT_GT(spec.totals.drafted_tokens, 0);
      EXPECT_EQ(spec.totals.generated_tokens, plain.totals.generated_tokens);
      if (more) more(plain, spec);
    }
  }

  testing::SeededRng rng_;
  checkpoint::LoadedModel loaded_;
  checkpoint::ModelWeights device_weights_;  // loaded_'s on the GPU, when the model runs there
  std::unique_ptr<model::Model> model_;
};

inline GenerateRequest greedy(std::vector<int64_t> prompt, int64_t max_tokens) {
  GenerateRequest r{std::move(prompt), {}};
  r.sampling.max_tokens = max_tokens;
  r.sampling.stop_at_eos = false;
  return r;
}

inline std::vector<GenerateRequest> SpeculativeBatchFixture::long_greedy_requests() {
  std::vector<GenerateRequest> requests;
  for (int64_t n : {3, 17, 40}) requests.push_back(greedy(random_prompt(n), long_generation()));
  return requests;
}

}  // namespace dsv4::runtime

// The expert-parallel tests' cases, run on the CPU (expert_parallel_test.cpp) and on one GPU
// (expert_parallel_cuda_test.cpp) alike. The model is the golden one with NVFP4 experts
// (brown_small: score- and hash-routed layers, CSA and HCA attention, an MTP block); the
// reference is the single-rank engine or model on the same device: R ranks must give its bits,
// logits and tokens, for fresh random prompts of random lengths batched together and chunked.
// Faults: a rank that fails or stalls ends the call with an error that names every rank, in
// bounded time, and the group stays failed; in a running batch no sequence draws a token from the
// failed step.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/device.h"
#include "checkpoint/loader.h"
#include "checkpoint/to_device.h"
#include "dsv4/engine.h"
#include "model/deepseek_v4.h"
#include "model/golden.h"
#include "runtime/batch.h"
#include "runtime/expert_parallel.h"
#include "runtime/expert_shards.h"
#include "runtime/placement.h"
#include "testing/random.h"

namespace dsv4::testing {

inline const std::string kEpModel = "brown_small/model";

inline EngineOptions ep_engine_options(int64_t ranks, EngineDevice device) {
  return {.model_dir = golden_path(kEpModel),
          .device = device,
          .experts = ExpertPrecision::kW4A4,
          .max_batch = 8,
          .max_step_tokens = 24,  // prompts run in chunks, so steps mix prefill and decode
          .expert_parallel = ranks};
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Three to five greedy prompts of 1 to 40 ids, every logit asked for, through an engine with
// `ranks` ranks and one with one rank: the same tokens and logit bits.
inline void expect_engine_ranks_give_one_ranks_bits(int64_t ranks, EngineDevice device) {
  Result<Engine> one = Engine::open(ep_engine_options(1, device));
  Result<Engine> many = Engine::open(ep_engine_options(ranks, device));
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  ASSERT_TRUE(many.ok()) << many.status().to_string();
  SeededRng rng;
  std::vector<GenerateRequest> requests(rng.uniform_int(3, 5));
  for (GenerateRequest& r : requests) {
    r.prompt.resize(rng.uniform_int(1, 40));
    for (int64_t& id : r.prompt) id = rng.uniform_int(0, one->vocab_size() - 1);
    r.sampling.max_tokens = rng.uniform_int(1, 8);
    r.sampling.stop_at_eos = false;
    r.return_prompt_logits = true;
    r.return_step_logits = true;
  }
  auto expected = one->generate_batch(requests);
  auto got = many->generate_batch(requests);
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  for (size_t i = 0; i < requests.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    EXPECT_EQ((*got)[i].tokens, (*expected)[i].tokens);
    EXPECT_TRUE(same_bits((*got)[i].prompt_logits, (*expected)[i].prompt_logits));
    EXPECT_TRUE(same_bits((*got)[i].step_logits, (*expected)[i].step_logits));
  }
}

// The model driven directly on `device`, so the placement's options (rank count 1, the
// watchdog, injected faults) are the test's.
class ModelRanksCases {
 public:
  explicit ModelRanksCases(Device device)
      : device_(device), loaded_(checkpoint::load_model(golden_path(kEpModel)).value()) {}

  // The checkpoint's calibrated W4A4 input scales dropped: the experts' inputs are then staged
  // with dynamic scales, the amax of the whole step, which the ranks must agree on.
  void drop_input_scales() {
    for (checkpoint::LayerWeights& layer : loaded_.weights.layers) {
      layer.ffn.experts.w13_input_scale = Tensor();
      layer.ffn.experts.w2_input_scale = Tensor();
    }
    on_device_.reset();
  }

  // The last-token logits of two sequences of fresh prompts of `shortest` to `longest` ids in
  // one forward.
  Result<std::vector<float>> logits(model::ExpertPlacement* placement, SeededRng& rng,
                                    int64_t shortest = 1, int64_t longest = 20) {
    DSV4_ASSIGN_OR_RETURN(const checkpoint::ModelWeights* weights, weights_on_device());
    if (placement != nullptr && released_) weights = &*released_;
    const model::Model model(*weights,
                             {.expert_mode = model::ExpertMode::kW4A4, .placement = placement});
    const int64_t vocab = model.config().vocab_size;
    std::vector<std::vector<int64_t>> prompts(2);
    std::vector<model::SequenceCache> caches;
    DSV4_ASSIGN_OR_RETURN(Tensor out, Tensor::empty(DType::kF32, {2, vocab}, device_));
    std::vector<model::SequenceChunk> chunks;
    for (size_t s = 0; s < prompts.size(); ++s) {
      prompts[s].resize(rng.uniform_int(shortest, longest));
      for (int64_t& id : prompts[s]) id = rng.uniform_int(0, vocab - 1);
      DSV4_ASSIGN_OR_RETURN(model::SequenceCache cache, model.new_cache(longest + 44));
      caches.push_back(std::move(cache));
    }
    for (size_t s = 0; s < prompts.size(); ++s) {
      chunks.push_back({.tokens = prompts[s],
                        .cache = &caches[s],
                        .logits = out.view().rows(static_cast<int64_t>(s), s + 1)});
    }
    DSV4_RETURN_IF_ERROR(model.forward(chunks));
    std::vector<float> host(static_cast<size_t>(2 * vocab));
    DSV4_RETURN_IF_ERROR(copy_tensor(
        TensorView::contiguous(host.data(), DType::kF32, Device::kCpu, {2, vocab}), out.view()));
    return host;
  }

  // From here on every rank reads its own copy of its experts (runtime/expert_shards.h), as
  // ranks on several GPUs do, though here they share the one device.
  void copy_shards() { copy_shards_ = true; }

  // The engine's --gpus N load, every rank on this one device: the model the ranks serve is
  // loaded with runtime::device_placement's per-layer hook, so each rank's copy of each main
  // layer is made as the loader places it and the loader's stacks are then freed
  // (ExpertShards::take_layer): only the ranks' copies hold the experts, so every read of them,
  // a grouped step's included, must come from there. The reference runs in place on the
  // weights kept whole.
  void release_after_copies() {
    copy_shards_ = true;
    release_ = true;
  }

  // Rank 0 owns one expert of each layer and the other ranks the rest (kernels/ep/
  // expert_sharding.h with_leader: what --gpus N plans where rank 0's GPU cannot hold an even
  // share beside every other weight).
  void shed_leader_experts() { leader_experts_ = 1; }

  Result<std::unique_ptr<runtime::ExpertParallel>> ranks(
      int n, std::function<Status(int, int64_t)> fault = nullptr,
      std::chrono::milliseconds watchdog = {}) {
    runtime::ExpertParallelOptions options{.n_ranks = n, .device = device_, .max_tokens = 8};
    if (n > 1) options.leader_experts = leader_experts_;
    if (watchdog.count() > 0) options.watchdog = watchdog;
    options.before_rank = std::move(fault);
    if (release_) {
      DSV4_ASSIGN_OR_RETURN(runtime::ExpertShards copies, load_layer_by_layer(options));
      return runtime::ExpertParallel::create(loaded_.weights.config, options, std::move(copies));
    }
    if (copy_shards_) {
      DSV4_ASSIGN_OR_RETURN(options.weights, weights_on_device());
      options.copy_shards = true;
    }
    return runtime::ExpertParallel::create(loaded_.weights.config, options);
  }

  // The model loaded onto device_ as under --gpus N (runtime::device_placement with the ranks'
  // copies), with `options`' ranks all on this device: released_ holds the weights, their main
  // layers' stacks freed, and the copies are returned.
  Result<runtime::ExpertShards> load_layer_by_layer(const runtime::ExpertParallelOptions& options) {
    DSV4_ASSIGN_OR_RETURN(const kernels::ep::ExpertSharding sharding,
                          runtime::rank_sharding(loaded_.weights.config.n_routed_experts,
                                                 options.n_ranks, options.leader_experts));
    runtime::ExpertShards copies = runtime::ExpertShards::for_ranks(
        sharding, device_ == Device::kCpu ? std::vector<int>{}
                                          : std::vector<int>(options.n_ranks, current_device()));
    const checkpoint::DevicePlacement placement = runtime::device_placement(
        ep_engine_options(options.n_ranks, device_ == Device::kCpu ? EngineDevice::kCpu
                                                                   : EngineDevice::kCuda),
        0, &copies);
    released_.reset();
    DSV4_ASSIGN_OR_RETURN(checkpoint::LoadedModel loaded,
                          checkpoint::load_model_on(golden_path(kEpModel), device_, placement));
    if (!loaded.report.clean()) return internal_error(loaded.report.first_problem());
    for (const checkpoint::LayerWeights& layer : loaded.weights.layers) {
      if (layer.ffn.experts.is_nvfp4() && !layer.ffn.experts.w13_nvfp4->packed.empty_tensor()) {
        return internal_error("the loader kept a main layer's stacks the ranks had taken");
      }
    }
    released_ = std::move(loaded.weights);
    return copies;
  }

  // 1 to 4 ranks against the model without a placement (moe_ffn in place), on the same prompts.
  void expect_in_place_bits(int64_t shortest = 1, int64_t longest = 20) {
    for (int n = 1; n <= 4; ++n) {
      SCOPED_TRACE(std::to_string(n) + " ranks");
      auto ep = ranks(n);
      ASSERT_TRUE(ep.ok()) << ep.status().to_string();
      SeededRng rng;
      const uint64_t seed = rng.seed();
      auto expected = logits(nullptr, rng, shortest, longest);
      SeededRng replay;  // the same prompts again
      replay.engine().seed(seed);
      auto got = logits(ep->get(), replay, shortest, longest);
      ASSERT_TRUE(expected.ok()) << expected.status().to_string();
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_TRUE(same_bits(*got, *expected));
    }
  }

  void expect_failing_rank_is_an_error_on_every_rank() {
    auto ep = ranks(4, [](int rank, int64_t layer) {
      return rank == 2 && layer == 1 ? internal_error("injected fault") : ok_status();
    });
    ASSERT_TRUE(ep.ok());
    SeededRng rng;
    const Result<std::vector<float>> out = logits(ep->get(), rng);
    ASSERT_FALSE(out.ok());
    const std::string message = out.status().message();
    EXPECT_NE(message.find("layer 1"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 2: injected fault"), std::string::npos) << message;
    for (const char* peer : {"rank 0: ep: peer rank 2 failed", "rank 1: ep: peer rank 2 failed",
                             "rank 3: ep: peer rank 2 failed"}) {
      EXPECT_NE(message.find(peer), std::string::npos) << message;
    }
    // The group stays failed: the next call fails at once with the same error.
    const auto start = std::chrono::steady_clock::now();
    const Result<std::vector<float>> again = logits(ep->get(), rng);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1000));
    ASSERT_FALSE(again.ok());
    EXPECT_EQ(again.status().message(), message);
  }

  // Rank 1 stalls until the test releases it (or a minute passes), so "not a hang" is a fact
  // about order, not a time bound a loaded machine could miss: the error must come back while
  // the rank is still stalled.
  void expect_stalled_rank_is_a_watchdog_error_not_a_hang() {
    const std::chrono::milliseconds watchdog(200);
    std::mutex mutex;
    std::condition_variable released_cv;
    bool released = false;
    std::atomic<bool> went_on = false;
    auto ep = ranks(
        3,
        [&](int rank, int64_t layer) {
          if (rank == 1 && layer == 0) {
            std::unique_lock lock(mutex);
            released_cv.wait_for(lock, std::chrono::minutes(1), [&] { return released; });
            went_on = true;
          }
          return ok_status();
        },
        watchdog);
    ASSERT_TRUE(ep.ok());
    SeededRng rng;
    const Result<std::vector<float>> out = logits(ep->get(), rng);
    EXPECT_FALSE(went_on) << "the call returned only after the stalled rank went on";
    {
      std::lock_guard lock(mutex);
      released = true;
    }
    released_cv.notify_all();
    ASSERT_FALSE(out.ok());
    const std::string message = out.status().message();
    EXPECT_NE(message.find("ep watchdog"), std::string::npos) << message;
    EXPECT_NE(message.find("for rank(s) 1 that never arrived"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 1: did not return within the watchdog (200 ms)"),
              std::string::npos)
        << message;
  }

  // A rank that fails in the fourth step of a running batch (the prompts' step, two decode
  // steps, then the fault): every sequence leaves with the error, none draws a token from the
  // failed step (each streamed exactly the first three of one rank's greedy tokens), and a
  // sequence admitted later fails at its first step with the same error.
  void expect_failed_step_draws_no_token() {
    SeededRng rng;
    std::vector<GenerateRequest> requests(3);
    for (GenerateRequest& r : requests) {
      r.prompt.resize(rng.uniform_int(1, 20));
      for (int64_t& id : r.prompt) id = rng.uniform_int(0, loaded_.weights.config.vocab_size - 1);
      r.sampling.max_tokens = 8;
      r.sampling.stop_at_eos = false;
    }
    const std::vector<BatchRun> expected = run_batch(nullptr, requests);
    std::atomic<int> calls = 0;
    auto ep = ranks(3, [&](int rank, int64_t layer) {
      return rank == 1 && layer == 0 && ++calls == 4 ? internal_error("injected fault")
                                                     : ok_status();
    });
    ASSERT_TRUE(ep.ok()) << ep.status().to_string();
    const std::vector<BatchRun> got = run_batch(ep->get(), requests);
    for (size_t i = 0; i < requests.size(); ++i) {
      SCOPED_TRACE("request " + std::to_string(i));
      ASSERT_TRUE(expected[i].status.ok()) << expected[i].status.to_string();
      ASSERT_FALSE(got[i].status.ok());
      EXPECT_NE(got[i].status.message().find("rank 1: injected fault"), std::string::npos)
          << got[i].status.message();
      EXPECT_EQ(got[i].streamed, std::vector<int64_t>(expected[i].streamed.begin(),
                                                      expected[i].streamed.begin() + 3));
    }
    const std::vector<BatchRun> later = run_batch(ep->get(), {requests[0]});
    EXPECT_TRUE(later[0].streamed.empty());
    EXPECT_EQ(later[0].status.message(), got[0].status.message());
  }

 private:
  struct BatchRun {
    std::vector<int64_t> streamed;  // the tokens on_token saw
    Status status;                  // of the request's end
  };

  // The requests through a running batch of the model on `placement` (null: in place), stepped
  // until every one has left.
  std::vector<BatchRun> run_batch(model::ExpertPlacement* placement,
                                  std::vector<GenerateRequest> requests) {
    std::vector<BatchRun> runs(requests.size());
    Result<const checkpoint::ModelWeights*> weights = weights_on_device();
    EXPECT_TRUE(weights.ok()) << weights.status().to_string();
    if (!weights.ok()) return runs;
    const model::Model model(**weights,
                             {.expert_mode = model::ExpertMode::kW4A4, .placement = placement});
    runtime::RunningBatch batch(model, model.config().eos_token_id, /*step_tokens=*/64,
                                /*prefix_cache_bytes=*/0);
    for (size_t i = 0; i < requests.size(); ++i) {
      BatchRun& run = runs[i];
      requests[i].on_token = [&run](int64_t token) {
        run.streamed.push_back(token);
        return true;
      };
      const Status admitted =
          batch.admit(requests[i], [&run](Result<Generation> r) { run.status = r.status(); });
      EXPECT_TRUE(admitted.ok()) << admitted.to_string();
    }
    for (int s = 0; s < 100 && !batch.empty(); ++s) batch.step();
    EXPECT_TRUE(batch.empty());
    return runs;
  }

  // The weights on device_ (the loaded ones on the CPU, a copy made once on a GPU).
  Result<const checkpoint::ModelWeights*> weights_on_device() {
    if (device_ == Device::kCpu) return &loaded_.weights;
    if (!on_device_) {
      DSV4_ASSIGN_OR_RETURN(checkpoint::ModelWeights copy,
                            checkpoint::copy_weights(loaded_.weights, device_));
      on_device_ = std::move(copy);
    }
    return &*on_device_;
  }

  Device device_;
  bool copy_shards_ = false, release_ = false;
  int64_t leader_experts_ = 0;  // 0: an even split
  checkpoint::LoadedModel loaded_;
  std::optional<checkpoint::ModelWeights> on_device_;
  std::optional<checkpoint::ModelWeights> released_;  // release_after_copies: the ranks' model
};

}  // namespace dsv4::testing

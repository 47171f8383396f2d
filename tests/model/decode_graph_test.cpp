// DecodeGraphs' host side (model/decode_graph.h; its replays are checked on the GPU in
// decode_graph_cuda_test.cpp): which bucket a batch runs as, what a graph is keyed on (its
// caches' sizes, not which caches), when padding rows are allowed, that a CPU model never hands
// a step to a graph, and what a step does when no graph can be made: the eager step's tokens
// with one note, and a clear error past the caches' capacity. Which sizes a plan captures, and
// what a plan that can capture none leaves.
#include "model/decode_graph.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/loader.h"
#include "model/golden.h"
#include "model/nvfp4_golden.h"
#include "testing/temp_dir.h"

namespace dsv4::model {
namespace {

TEST(DecodeGraphsTest, BatchesRunAsTheNextPowerOfTwoUpToTheMaxBatch) {
  // {batch, max batch, rows}
  const std::vector<std::vector<int64_t>> cases = {
      {1, 8, 1}, {2, 8, 2}, {3, 8, 4},  {4, 8, 4},   {5, 8, 8},   {7, 8, 8},  {8, 8, 8},
      {9, 8, 9}, {9, 12, 12}, {12, 12, 12}, {13, 12, 13}, {33, 64, 64}, {3, 3, 3}, {3, 0, 3},
      {5, 0, 5}};
  for (const std::vector<int64_t>& c : cases) {
    EXPECT_EQ(DecodeGraphs::bucket_size(c[0], c[1]), c[2])
        << "batch " << c[0] << ", max batch " << c[1];
  }
}

// plan captures a graph for every size a step of a server's batch can run as: its buckets, or
// every batch size where steps are not padded.
TEST(DecodeGraphsTest, APlanCapturesEveryBucketOrEveryBatchSize) {
  // {padding max batch, max batch}, sizes
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{1, 1}, {1}},
      {{3, 3}, {1, 2, 3}},
      {{8, 8}, {1, 2, 4, 8}},
      {{12, 12}, {1, 2, 4, 8, 12}},
      {{32, 32}, {1, 2, 4, 8, 16, 32}},
      {{0, 5}, {1, 2, 3, 4, 5}}};
  for (const auto& [max, sizes] : cases) {
    EXPECT_EQ(DecodeGraphs::planned_sizes(max[0], max[1]), sizes)
        << "padding max batch " << max[0] << ", max batch " << max[1];
  }
}

// A graph's key is its caches' sizes, never a cache's identity: a step of other sequences with
// caches of the sizes it was captured for (other caches, the same in another order, a fresh
// one) replays it; one whose caches hold fewer entries too (the padding covers them); one with
// more entries or other rings does not.
TEST(DecodeGraphsTest, AStepsShapeIsItsCachesSizesNotWhichCachesTheyAre) {
  auto loaded = checkpoint::load_model(testing::golden_path("tiny_a_pretrained/model"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  const Model model(loaded->weights, ModelOptions{});
  const auto make = [&](int64_t max_positions, int64_t step_tokens) {
    auto cache = model.new_cache(max_positions, step_tokens);
    EXPECT_TRUE(cache.ok()) << cache.status().to_string();
    return std::move(cache).value();
  };
  SequenceCache a = make(64, 4), b = make(64, 4), fresh = make(64, 4), wide = make(128, 4),
                other_rings = make(64, 8);
  ASSERT_FALSE(HasFailure());
  const int64_t token = 1;
  const auto shape = [&](std::vector<SequenceCache*> caches) {
    std::vector<SequenceChunk> chunks;
    for (SequenceCache* cache : caches) chunks.push_back({std::span(&token, 1), 0, cache, {}});
    return DecodeStepShape::of(chunks);
  };
  const DecodeStepShape captured = shape({&a, &b});
  ASSERT_EQ(captured.ring_rows.size(), static_cast<size_t>(model.config().n_layer));
  for (const std::vector<SequenceCache*>& step :
       {std::vector{&b, &a}, std::vector{&fresh, &b}, std::vector{&fresh, &fresh}}) {
    const DecodeStepShape other = shape(step);
    EXPECT_EQ(other.ring_rows, captured.ring_rows);
    EXPECT_EQ(other.capacity, captured.capacity);
    EXPECT_TRUE(captured.holds(other));
  }
  const DecodeStepShape wider = shape({&a, &wide});
  EXPECT_FALSE(captured.holds(wider));
  EXPECT_TRUE(wider.holds(captured));
  const DecodeStepShape rings = shape({&other_rings, &b});
  EXPECT_FALSE(captured.holds(rings));
  EXPECT_FALSE(rings.holds(captured));
}

TEST(DecodeGraphsTest, W4A4ExpertsWithDynamicScalesRunEveryBatchUnpadded) {
  testing::TempDir dir;
  const std::string model_dir = testing::quantized_tiny_b(dir);
  ASSERT_FALSE(HasFailure());
  auto loaded = checkpoint::load_model(model_dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  checkpoint::ModelWeights& weights = loaded->weights;
  const ModelOptions w4a4{
      .expert_mode = ExpertMode::kW4A4, .cuda_graph = true, .cuda_graph_max_batch = 8};
  ModelOptions w4a16 = w4a4;
  w4a16.expert_mode = ExpertMode::kW4A16;
  // Calibrated input scales: static staging, each row its own.
  EXPECT_EQ(padding_max_batch(weights, w4a4), 8);
  EXPECT_EQ(padding_max_batch(weights, w4a16), 8);
  // One layer's down projection staged dynamically: the amax of all rows sets its scale.
  auto nvfp4 =
      std::find_if(weights.layers.begin(), weights.layers.end(),
                   [](const checkpoint::LayerWeights& l) { return l.ffn.experts.is_nvfp4(); });
  ASSERT_NE(nvfp4, weights.layers.end());
  nvfp4->ffn.experts.w2_input_scale = Tensor{};
  EXPECT_EQ(padding_max_batch(weights, w4a4), 0);
  EXPECT_EQ(padding_max_batch(weights, w4a16), 8);
  // Dense routed experts stage nothing.
  auto dense = checkpoint::load_model(testing::golden_path("tiny_a_pretrained/model"));
  ASSERT_TRUE(dense.ok()) << dense.status().to_string();
  EXPECT_EQ(padding_max_batch(dense->weights, w4a4), 8);
}

TEST(DecodeGraphsTest, ACpuModelRunsEveryStepOpByOp) {
  auto loaded = checkpoint::load_model(testing::golden_path("tiny_a_pretrained/model"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  const Model model(loaded->weights, ModelOptions{.cuda_graph = true, .cuda_graph_max_batch = 4});
  auto cache = model.new_cache(8);
  ASSERT_TRUE(cache.ok()) << cache.status().to_string();
  Tensor logits = Tensor::host(DType::kF32, {1, model.config().vocab_size});
  const std::vector<int64_t> token = {1};
  const SequenceChunk chunk{token, 0, &*cache, logits.view()};
  EXPECT_FALSE(DecodeGraphs::serves(model, std::span(&chunk, 1)));
  ASSERT_TRUE(model.forward(std::span(&chunk, 1)).ok());
  EXPECT_EQ(model.decode_graph_stats().graphs, 0);
  EXPECT_EQ(model.decode_graph_stats().device_bytes, 0);
}

// Sequences stepped through DecodeGraphs::run and, each of them, alone.
struct TwinCaches {
  std::vector<SequenceCache>& batched;
  std::vector<SequenceCache>& alone;
  std::vector<int64_t>& next;  // each sequence's next token
};

// One step of the first n sequences through `graphs`: each row's logits must be the bits of its
// sequence stepped alone; each is fed its greedy token next.
void expect_rows_match_alone(DecodeGraphs& graphs, const Model& model, const TwinCaches& seqs,
                             int64_t n) {
  const int64_t v = model.config().vocab_size;
  Tensor logits = Tensor::host(DType::kF32, {n, v});
  std::vector<SequenceChunk> chunks;
  for (int64_t s = 0; s < n; ++s) {
    chunks.push_back({std::span(&seqs.next[s], 1), seqs.batched[s].n_tokens(), &seqs.batched[s],
                      logits.view().rows(s, s + 1)});
  }
  const Status ran = graphs.run(model, chunks);
  ASSERT_TRUE(ran.ok()) << ran.to_string();
  for (int64_t s = 0; s < n; ++s) {
    Tensor want = Tensor::host(DType::kF32, {1, v});
    ASSERT_TRUE(model
                    .forward(std::span(&seqs.next[s], 1), seqs.alone[s].n_tokens(), seqs.alone[s],
                             want.view())
                    .ok());
    ASSERT_EQ(std::memcmp(logits.data_as<float>() + s * v, want.data_as<float>(), v * 4), 0)
        << "sequence " << s;
    const float* row = want.data_as<float>();
    seqs.next[s] = std::max_element(row, row + v) - row;
  }
}

// DecodeGraphs::run on a CPU model, whose steps no graph can hold (a capture would run the step
// itself): each batch size's first step runs eagerly, its second tries a capture, which gives
// up with one line on stderr, and from then on the bucket stays eager. Whatever the batch (one
// row, three padded to the bucket of four, five past the largest bucket), every row's logits
// are the bits of its sequence stepped alone, and no graph is held. A step past a cache's
// capacity is refused (resource_exhausted) before any cache moves, and the batch goes on.
TEST(DecodeGraphsTest, AStepNoGraphCanHoldRunsEagerlyWithOneNoteAndTheSameBits) {
  auto loaded = checkpoint::load_model(testing::golden_path("tiny_a_pretrained/model"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  const Model model(loaded->weights, ModelOptions{});
  const int64_t v = model.config().vocab_size;
  constexpr int64_t kMaxBatch = 4, kSequences = 5;
  std::mt19937_64 rng(std::random_device{}());
  // Prompts of random lengths, so the compressors (CSA m = 4, HCA m = 16) pool at different
  // steps of the decode; each sequence twice: stepped through the graphs and alone.
  std::vector<SequenceCache> batched, alone;
  std::vector<int64_t> next;  // each sequence's next token
  for (int64_t s = 0; s < kSequences; ++s) {
    const auto n = static_cast<int64_t>(3 + rng() % 20);
    std::vector<int64_t> prompt(static_cast<size_t>(n));
    for (int64_t& id : prompt) id = static_cast<int64_t>(2 + rng() % (v - 2));
    for (std::vector<SequenceCache>* caches : {&batched, &alone}) {
      // Room for the decode below and no more: the last step goes past it.
      auto cache = model.new_cache(n + 10);
      ASSERT_TRUE(cache.ok()) << cache.status().to_string();
      caches->push_back(std::move(cache).value());
      Tensor logits = Tensor::host(DType::kF32, {1, v});
      ASSERT_TRUE(model.forward(prompt, 0, caches->back(), logits.view()).ok());
    }
    next.push_back(static_cast<int64_t>(2 + rng() % (v - 2)));
  }
  DecodeGraphs graphs(kMaxBatch);
  // The batch of each step: its first n sequences; each size for two steps (eager, then a failed
  // capture), the first for a third (eager, without another note), running as 1, 4, 5 and 2
  // rows.
  const std::vector<int64_t> batches = {1, 1, 1, 3, 3, 5, 5, 2, 2};
  ::testing::internal::CaptureStderr();
  for (size_t step = 0; step < batches.size(); ++step) {
    SCOPED_TRACE("step " + std::to_string(step) + ", batch " + std::to_string(batches[step]));
    expect_rows_match_alone(graphs, model, {batched, alone, next}, batches[step]);
    ASSERT_FALSE(HasFailure());
  }
  const std::string notes = ::testing::internal::GetCapturedStderr();
  for (const int64_t rows : {1, 4, 5, 2}) {
    const std::string note =
        "the decode step of " + std::to_string(rows) + " rows runs without a CUDA graph: ";
    const size_t at = notes.find(note);
    EXPECT_NE(at, std::string::npos) << notes;
    EXPECT_EQ(notes.find(note, at + 1), std::string::npos) << "said twice: " << notes;
  }
  EXPECT_EQ(std::count(notes.begin(), notes.end(), '\n'), 4) << notes;
  EXPECT_EQ(graphs.stats().graphs, 0);

  // Sequence 2 at its capacity (the others have room): the step is refused whole.
  SequenceCache& full = batched[2];
  while (full.n_tokens() < full.layers.front().max_positions) {
    Tensor logits = Tensor::host(DType::kF32, {1, v});
    ASSERT_TRUE(model.forward(std::span(&next[2], 1), full.n_tokens(), full, logits.view()).ok());
  }
  std::vector<int64_t> before;
  for (const SequenceCache& cache : batched) before.push_back(cache.n_tokens());
  Tensor logits = Tensor::host(DType::kF32, {3, v});
  std::vector<SequenceChunk> chunks;
  for (int64_t s = 0; s < 3; ++s) {
    chunks.push_back(
        {std::span(&next[s], 1), batched[s].n_tokens(), &batched[s], logits.view().rows(s, s + 1)});
  }
  const Status refused = graphs.run(model, chunks);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted) << refused.to_string();
  for (int64_t s = 0; s < kSequences; ++s) EXPECT_EQ(batched[s].n_tokens(), before[s]) << s;
  chunks.erase(chunks.begin() + 2);
  EXPECT_TRUE(graphs.run(model, chunks).ok());
}

// A plan on a CPU model, which no graph can hold: it captures nothing, says why in its note, and
// leaves steps unpadded; from then on a step never tries a capture (no note of a failed one), its
// rows keep the bits of their sequences stepped alone, and a size without a graph is said once.
TEST(DecodeGraphsTest, APlanThatHoldsNoGraphLeavesEveryStepEagerAndUnpadded) {
  auto loaded = checkpoint::load_model(testing::golden_path("tiny_a_pretrained/model"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  const Model model(loaded->weights, ModelOptions{});
  DecodeGraphs graphs(/*max_batch=*/4);
  Result<DecodeGraphPlan> plan = graphs.plan(model, 4, 64);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_TRUE(plan->sizes.empty());
  EXPECT_NE(plan->note.find("decode steps of 1 rows and more run without a CUDA graph"),
            std::string::npos)
      << plan->note;
  EXPECT_NE(plan->note.find("CPU model"), std::string::npos) << plan->note;
  EXPECT_EQ(plan->device_bytes, 0);

  constexpr int64_t kSequences = 3;
  std::vector<SequenceCache> batched, alone;
  for (int64_t s = 0; s < kSequences; ++s) {
    for (std::vector<SequenceCache>* caches : {&batched, &alone}) {
      auto cache = model.new_cache(16);
      ASSERT_TRUE(cache.ok()) << cache.status().to_string();
      caches->push_back(std::move(cache).value());
    }
  }
  std::vector<int64_t> next = {5, 7, 11};
  ::testing::internal::CaptureStderr();
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    expect_rows_match_alone(graphs, model, {batched, alone, next}, kSequences);
    ASSERT_FALSE(HasFailure());
  }
  const std::string notes = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(notes,
            "dsv4: note: the decode step of 3 rows runs without a CUDA graph: none was planned "
            "for its sizes\n");
  const DecodeGraphStats stats = graphs.stats();
  EXPECT_EQ(stats.graphs, 0);
  EXPECT_EQ(stats.captures, 0);
  EXPECT_EQ(stats.planned_batch, 0);
  EXPECT_EQ(stats.planned_bytes, 0);
}

}  // namespace
}  // namespace dsv4::model

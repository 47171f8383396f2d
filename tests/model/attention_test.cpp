// The attention half of every golden config against transformers' own per-module outputs
// (tests/golden/*/layers.safetensors, prompt 0): every layer, whatever its type (sliding, CSA,
// HCA), as one prefill and as prefills in chunks and token-by-token decode, whose chunk
// boundaries cross window and compression-block boundaries. The cache logic is where bugs hide;
// the intermediates (compressed entries, indexer picks) are compared too, so that a failure
// points at its module.
#include "model/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/buffer.h"
#include "checkpoint/loader.h"
#include "model/cache_rollback.h"
#include "model/golden.h"
#include "model/indexer.h"
#include "model/rope.h"
#include "testing/compare.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4::model {
namespace {

using checkpoint::AttentionType;
using testing::golden_tensor;
using testing::kGoldenLayerRelTol;
using testing::max_row_rel_error;

const char* type_name(AttentionType type) {
  switch (type) {
    case AttentionType::kSliding:
      return "sliding";
    case AttentionType::kCompressedSparse:
      return "CSA";
    case AttentionType::kHeavilyCompressed:
      return "HCA";
  }
  return "?";
}

// One golden folder: its model and the prompt-0 intermediates.
struct Golden {
  checkpoint::ModelWeights weights;
  format::SafetensorsFile layers;
  int64_t n_tokens = 0;

  explicit Golden(const std::string& folder)
      : layers(testing::open_golden(folder + "/layers.safetensors")) {
    auto loaded = checkpoint::load_model(testing::golden_path(folder + "/model"));
    EXPECT_TRUE(loaded.ok()) << loaded.status().to_string();
    if (loaded.ok()) weights = std::move(loaded.value().weights);
    n_tokens = std::stoll(layers.metadata().at("prompt_len"));
  }
  const checkpoint::ModelConfig& config() const { return weights.config; }
  std::string name(int64_t layer, const std::string& module) const {
    return "model.layers." + std::to_string(layer) + "." + module;
  }
  Tensor input(int64_t layer) const {
    return golden_tensor(layers, name(layer, "input_layernorm"), {n_tokens, config().hidden_size});
  }
  Tensor expected(int64_t layer) const {
    return golden_tensor(layers, name(layer, "self_attn.o_b_proj"),
                         {n_tokens, config().hidden_size});
  }
};

// Runs layer `layer` over x in calls of `chunks` tokens (the last repeated until x is used up)
// with a fresh cache of `max_step_tokens`; returns the output [T, D] and leaves the cache.
Tensor run_chunks(const Golden& golden, int64_t layer, const Tensor& x,
                  const std::vector<int64_t>& chunks, int64_t max_step_tokens,
                  AttentionCache& cache) {
  const int64_t n_tokens = x.shape()[0];
  auto created =
      AttentionCache::create(golden.config(), layer, n_tokens, Device::kCpu, max_step_tokens);
  EXPECT_TRUE(created.ok()) << created.status().to_string();
  cache = std::move(created).value();
  Tensor out = Tensor::host(DType::kF32, x.shape());
  std::fill_n(out.data_as<float>(), out.numel(), std::numeric_limits<float>::quiet_NaN());
  int64_t begin = 0;
  for (size_t c = 0; begin < n_tokens; ++c) {
    const int64_t end = std::min(n_tokens, begin + chunks[std::min(c, chunks.size() - 1)]);
    const Status status =
        attention_forward(golden.config(), layer, golden.weights.layers[layer].attn,
                          x.view().rows(begin, end), begin, cache, out.view().rows(begin, end));
    EXPECT_TRUE(status.ok()) << status.to_string();
    begin = end;
  }
  return out;
}

class AttentionGoldenTest : public ::testing::TestWithParam<const char*> {};

TEST_P(AttentionGoldenTest, PrefillMatchesTransformersOnEveryLayer) {
  const Golden golden(GetParam());
  for (int64_t layer = 0; layer < golden.config().n_layer; ++layer) {
    const AttentionType type = golden.config().layers[layer].attention;
    AttentionCache cache;
    const Tensor out =
        run_chunks(golden, layer, golden.input(layer), {golden.n_tokens}, 256, cache);
    const Tensor expected = golden.expected(layer);
    EXPECT_LT(max_row_rel_error(out.data_as<float>(), expected.data_as<float>(), golden.n_tokens,
                                golden.config().hidden_size),
              kGoldenLayerRelTol)
        << "layer " << layer << " (" << type_name(type) << ")";
    if (!cache.compressor) continue;
    // The compressed entries: normed and rotated at the block's first position.
    const int64_t n_entries = cache.compressor->n_entries;
    ASSERT_EQ(n_entries, golden.n_tokens / golden.config().layers[layer].compress_ratio);
    if (n_entries == 0) continue;
    const Tensor entries =
        golden_tensor(golden.layers, golden.name(layer, "self_attn.compressor.out_0"),
                      {n_entries, golden.config().head_dim});
    EXPECT_LT(max_row_rel_error(cache.compressor->entries.data_as<float>(),
                                entries.data_as<float>(), n_entries, golden.config().head_dim),
              kGoldenLayerRelTol)
        << "layer " << layer << " compressed entries";
  }
}

TEST_P(AttentionGoldenTest, ChunkedPrefillAndDecodeMatchTransformers) {
  const Golden golden(GetParam());
  const int64_t n = golden.n_tokens;
  // {1, 7, rest} crosses a ratio-4 block inside the second call; all-ones is pure decode; the
  // others put boundaries right before and after blocks and the window.
  const std::vector<std::vector<int64_t>> plans = {
      {1, 7, n}, {1}, {3, 5, 2}, {n - 1, 1}, {4, 4, 1, n}};
  for (int64_t layer = 0; layer < golden.config().n_layer; ++layer) {
    const Tensor x = golden.input(layer);
    const Tensor expected = golden.expected(layer);
    for (const auto& plan : plans) {
      for (int64_t max_step : {int64_t{256}, int64_t{2}}) {
        AttentionCache cache;
        const Tensor out = run_chunks(golden, layer, x, plan, max_step, cache);
        EXPECT_LT(max_row_rel_error(out.data_as<float>(), expected.data_as<float>(), n,
                                    golden.config().hidden_size),
                  kGoldenLayerRelTol)
            << "layer " << layer << " (" << type_name(golden.config().layers[layer].attention)
            << ") chunks " << ::testing::PrintToString(plan) << " max_step_tokens " << max_step;
      }
    }
  }
}

TEST_P(AttentionGoldenTest, IndexerPicksMatchTransformers) {
  const Golden golden(GetParam());
  const checkpoint::ModelConfig& config = golden.config();
  const int64_t n = golden.n_tokens;
  if (std::none_of(config.layers.begin(), config.layers.end(), [](const auto& schedule) {
        return schedule.attention == AttentionType::kCompressedSparse;
      })) {
    GTEST_SKIP() << GetParam() << " has no CSA layer";
  }
  // Each layer twice: the indexer's compressor projecting the rows itself (a step of one
  // sequence), and taking them projected already (a step of several).
  for (int64_t run = 0; run < 2 * config.n_layer; ++run) {
    const int64_t layer = run / 2;
    const bool projected = run % 2 == 1;
    if (config.layers[layer].attention != AttentionType::kCompressedSparse) continue;
    SCOPED_TRACE(projected ? "rows projected before" : "rows projected by the compressor");
    auto cache = AttentionCache::create(config, layer, n, Device::kCpu);
    ASSERT_TRUE(cache.ok()) << cache.status().to_string();
    const Tensor x = golden.input(layer);
    const Tensor q_latent = golden_tensor(golden.layers, golden.name(layer, "self_attn.q_a_norm"),
                                          {n, config.q_lora_rank});
    const checkpoint::IndexerWeights& weights = *golden.weights.layers[layer].attn.indexer;
    IndexerStep step;
    step.rows.x = x.view();
    CompressorRows rows;
    if (projected) {
      auto made = project_compressor_rows(weights.compressor, x.view(), Numerics::kExact);
      ASSERT_TRUE(made.ok()) << made.status().to_string();
      rows = std::move(made.value());
      step.rows.kv = rows.kv.view();
      step.rows.gate = rows.gate.view();
    }
    Tensor positions = Tensor::host(DType::kI64, {n});
    for (int64_t t = 0; t < n; ++t) {
      positions.data_as<int64_t>()[t] = t;
      step.host_positions.push_back(t);
    }
    step.positions = positions.view();
    auto rope = RopeTables::create(config, Device::kCpu);
    ASSERT_TRUE(rope.ok()) << rope.status().to_string();
    step.inv_freq = rope->of_layer(config, layer);
    auto queries = indexer_queries(config, weights, x.view(), q_latent.view(), positions.view(),
                                   step.inv_freq, Numerics::kExact);
    ASSERT_TRUE(queries.ok()) << queries.status().to_string();
    step.q = queries->q.view();
    step.head_weights = queries->weights.view();
    CompressorCache& compressor = *cache.value().indexer;
    const Status fed = compressor_forward(weights.compressor, step.rows, step.inv_freq,
                                          static_cast<float>(config.rms_norm_eps), compressor);
    ASSERT_TRUE(fed.ok()) << fed.to_string();
    auto picks = indexer_picks(config, step, compressor, compressor.n_entries);
    ASSERT_TRUE(picks.ok()) << picks.status().to_string();
    const int64_t k = picks.value().shape()[1];
    const Tensor expected =
        golden_tensor(golden.layers, golden.name(layer, "self_attn.compressor.indexer"), {n, k});
    // transformers' topk order is unspecified: compare each query's picks as a set.
    for (int64_t t = 0; t < n; ++t) {
      std::multiset<int64_t> ours, theirs;
      for (int64_t j = 0; j < k; ++j) {
        ours.insert(picks.value().data_as<int32_t>()[t * k + j]);
        theirs.insert(static_cast<int64_t>(expected.data_as<float>()[t * k + j]));
      }
      EXPECT_EQ(ours, theirs) << "layer " << layer << " query " << t;
    }
  }
}

// Longer than the golden prompt: 61 tokens (no multiple of 4 or 8) of random input through every
// layer of configs whose windows (8, 4) and blocks (4, 8) the sequence crosses many times and
// whose indexer keeps fewer entries than exist (tiny_d: 2 of up to 15), stepwise against one call.
class AttentionStepwiseTest : public ::testing::TestWithParam<const char*> {};

TEST_P(AttentionStepwiseTest, StepsMatchOneCall) {
  const Golden golden(GetParam());
  testing::SeededRng rng;
  std::normal_distribution<float> normal;
  const int64_t n = 61;
  Tensor x = Tensor::host(DType::kF32, {n, golden.config().hidden_size});
  for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = normal(rng.engine());
  const std::vector<std::vector<int64_t>> plans = {{1}, {1, 7, n}, {5, 11, 3}, {9}};
  for (int64_t layer = 0; layer < golden.config().n_layer; ++layer) {
    AttentionCache cache;
    const Tensor one_call = run_chunks(golden, layer, x, {n}, 256, cache);
    for (const auto& plan : plans) {
      for (int64_t max_step : {int64_t{256}, int64_t{3}}) {
        const Tensor out = run_chunks(golden, layer, x, plan, max_step, cache);
        EXPECT_LT(max_row_rel_error(out.data_as<float>(), one_call.data_as<float>(), n,
                                    golden.config().hidden_size),
                  testing::kStepwiseRelTol)
            << "layer " << layer << " (" << type_name(golden.config().layers[layer].attention)
            << ") chunks " << ::testing::PrintToString(plan) << " max_step_tokens " << max_step;
      }
    }
  }
}

// A step's decode rows run batched (one launch an op for all the sequences, each over its own
// cache: kernels/ops.h's "Decode rows"); each row must get exactly the bits of its sequence
// stepped alone, whatever the other sequences' phases in the window ring and the compression
// blocks, and beside a prompt chunk of another sequence in the same step (which runs on its own).
TEST_P(AttentionStepwiseTest, BatchedDecodeRowsAreEachSequenceAlone) {
  const Golden golden(GetParam());
  const checkpoint::ModelConfig& config = golden.config();
  const int64_t d = config.hidden_size;
  testing::SeededRng rng;
  std::normal_distribution<float> normal;
  const std::vector<int64_t> prompts = {3, 9, 17, 1};  // prefilled, then decoded together
  const int64_t n_steps = 21, n_chunk = 5;             // and a fifth sequence's prompt chunks
  const int64_t n_seq = static_cast<int64_t>(prompts.size());
  const int64_t n_max = 17 + n_steps;
  std::vector<Tensor> xs;
  for (int64_t s = 0; s <= n_seq; ++s) {
    xs.push_back(Tensor::host(DType::kF32, {n_max + n_chunk * n_steps, d}));
    for (int64_t i = 0; i < xs.back().numel(); ++i)
      xs.back().data_as<float>()[i] = normal(rng.engine());
  }
  for (int64_t layer = 0; layer < config.n_layer; ++layer) {
    SCOPED_TRACE("layer " + std::to_string(layer) + " (" +
                 type_name(config.layers[layer].attention) + ")");
    const checkpoint::AttentionWeights& w = golden.weights.layers[layer].attn;
    std::vector<AttentionCache> batched, alone;
    for (int64_t s = 0; s <= n_seq; ++s) {
      const int64_t capacity = xs[s].shape()[0];
      for (auto* caches : {&batched, &alone}) {
        auto made = AttentionCache::create(config, layer, capacity, Device::kCpu);
        ASSERT_TRUE(made.ok()) << made.status().to_string();
        caches->push_back(std::move(made).value());
      }
    }
    for (int64_t s = 0; s < n_seq; ++s) {
      Tensor out = Tensor::host(DType::kF32, {prompts[s], d});
      for (auto* caches : {&batched, &alone}) {
        ASSERT_TRUE(attention_forward(config, layer, w, xs[s].view().rows(0, prompts[s]), 0,
                                      (*caches)[s], out.view())
                        .ok());
      }
    }
    for (int64_t step = 0; step < n_steps; ++step) {
      // The decode rows of every sequence, then the fifth one's next chunk.
      const int64_t n_rows = n_seq + n_chunk;
      Tensor x = Tensor::host(DType::kF32, {n_rows, d}),
             out = Tensor::host(DType::kF32, {n_rows, d});
      std::vector<SequenceRows> rows;
      for (int64_t s = 0; s < n_seq; ++s) {
        const int64_t pos = prompts[s] + step;
        std::copy_n(xs[s].data_as<float>() + pos * d, d, x.data_as<float>() + s * d);
        rows.push_back({s, s + 1, pos, &batched[s]});
      }
      const int64_t chunk_pos = step * n_chunk;
      std::copy_n(xs[n_seq].data_as<float>() + chunk_pos * d, n_chunk * d,
                  x.data_as<float>() + n_seq * d);
      rows.push_back({n_seq, n_rows, chunk_pos, &batched[n_seq]});
      const Status status = attention_forward(config, layer, w, x.view(), rows, out.view());
      ASSERT_TRUE(status.ok()) << status.to_string();
      for (int64_t s = 0; s < n_seq; ++s) {
        Tensor want = Tensor::host(DType::kF32, {1, d});
        const int64_t pos = prompts[s] + step;
        ASSERT_TRUE(attention_forward(config, layer, w, xs[s].view().rows(pos, pos + 1), pos,
                                      alone[s], want.view())
                        .ok());
        EXPECT_TRUE(std::equal(want.data_as<float>(), want.data_as<float>() + d,
                               out.data_as<float>() + s * d))
            << "sequence " << s << " step " << step;
      }
    }
    // The caches hold the same state: their entries bit for bit.
    for (int64_t s = 0; s < n_seq; ++s) {
      for (const auto member : {&AttentionCache::compressor, &AttentionCache::indexer}) {
        const std::optional<CompressorCache>& a = batched[s].*member;
        const std::optional<CompressorCache>& b = alone[s].*member;
        if (!a) continue;
        ASSERT_EQ(a->n_entries, b->n_entries);
        ASSERT_EQ(a->n_rows, b->n_rows);
        const int64_t n = a->n_entries * a->width;
        EXPECT_TRUE(std::equal(a->entries.data_as<float>(), a->entries.data_as<float>() + n,
                               b->entries.data_as<float>()))
            << "sequence " << s;
      }
    }
  }
}

// The host side of decode runs that a replayed graph runs instead of the step (attention.h:
// check_decode_step, advance_decode_step; model/decode_graph.h): a run of 1 … 4 rows of one
// sequence (a verify step's token and drafts; its caches armed for a rollback every other step,
// then rolled back past some rows) is checked from its first row, and moves every count (its
// tokens, each compressor's rows and entries and their journals') as the eager step does; a run
// that does not continue its cache, or passes its capacity, is refused with the eager step's
// codes.
TEST_P(AttentionStepwiseTest, ADecodeRunsHostSideMovesTheEagerStepsCounts) {
  const Golden golden(GetParam());
  const checkpoint::ModelConfig& config = golden.config();
  const int64_t d = config.hidden_size, n_max = 48;
  testing::SeededRng rng;
  std::normal_distribution<float> normal;
  Tensor x = Tensor::host(DType::kF32, {n_max, d});
  for (int64_t i = 0; i < x.numel(); ++i) x.data_as<float>()[i] = normal(rng.engine());
  Tensor out = Tensor::host(DType::kF32, {n_max, d});
  const auto counts = [](const AttentionCache& cache) {
    std::vector<int64_t> all{cache.n_tokens};
    for (const std::optional<CompressorCache>* k : {&cache.compressor, &cache.indexer}) {
      if (!k->has_value()) continue;
      const CompressorCache& c = **k;
      all.insert(all.end(), {c.n_rows, c.n_entries, c.journal.n_fed, c.journal.pooled ? 1 : 0});
    }
    return all;
  };
  for (int64_t layer = 0; layer < config.n_layer; ++layer) {
    SCOPED_TRACE("layer " + std::to_string(layer));
    const checkpoint::AttentionWeights& w = golden.weights.layers[layer].attn;
    auto eager = AttentionCache::create(config, layer, n_max, Device::kCpu, 4);
    auto host = AttentionCache::create(config, layer, n_max, Device::kCpu, 4);
    ASSERT_TRUE(eager.ok() && host.ok());
    const int64_t n_prompt = rng.uniform_int(1, 9);
    for (AttentionCache* cache : {&*eager, &*host}) {
      ASSERT_TRUE(attention_forward(config, layer, w, x.view().rows(0, n_prompt), 0, *cache,
                                    out.view().rows(0, n_prompt))
                      .ok());
    }
    for (int64_t step = 0, pos = n_prompt; pos < n_max; ++step, pos = eager->n_tokens) {
      const int64_t n = std::min(rng.uniform_int(1, 4), n_max - pos);
      const bool armed = step % 2 == 1;
      if (armed) {
        ASSERT_TRUE(arm_rollback(*eager).ok() && arm_rollback(*host).ok());
      }
      const std::vector<AttentionCache*> columns(static_cast<size_t>(n), &*host);
      std::vector<int64_t> positions(static_cast<size_t>(n)), late(static_cast<size_t>(n));
      for (int64_t t = 0; t < n; ++t) positions[t] = pos + t, late[t] = pos + t + 1;
      EXPECT_EQ(check_decode_step(config, layer, columns, late).code(),
                StatusCode::kInvalidArgument);
      ASSERT_TRUE(check_decode_step(config, layer, columns, positions).ok());
      const SequenceRows run{0, n, pos, &*eager};
      ASSERT_TRUE(attention_forward(config, layer, w, x.view().rows(pos, pos + n),
                                    std::span(&run, 1), out.view().rows(pos, pos + n))
                      .ok());
      advance_decode_step(columns, positions);
      ASSERT_EQ(counts(*host), counts(*eager)) << "a run of " << n << " at " << pos;
      if (!armed) continue;
      const int64_t kept = pos + rng.uniform_int(1, n);
      ASSERT_TRUE(roll_back(*eager, kept).ok() && roll_back(*host, kept).ok());
      ASSERT_EQ(counts(*host), counts(*eager)) << "rolled back to " << kept;
    }
    const std::vector<int64_t> past = {n_max};
    const std::vector<AttentionCache*> full = {&*host};
    EXPECT_EQ(check_decode_step(config, layer, full, past).code(), StatusCode::kResourceExhausted);
  }
}

INSTANTIATE_TEST_SUITE_P(Golden, AttentionStepwiseTest,
                         ::testing::Values("tiny_b_state_dict", "tiny_d_state_dict"));

// Misuse that the world (a runtime bug or a bad request) can cause is a Status, never a crash.
TEST(AttentionCacheTest, RefusesBadArgumentsAndOutOfOrderTokens) {
  const Golden golden("tiny_b_state_dict");
  const checkpoint::ModelConfig& config = golden.config();
  // Layer n_layer is the MTP block; past it there is none.
  EXPECT_TRUE(AttentionCache::create(config, config.n_layer, 8, Device::kCpu).ok());
  EXPECT_EQ(AttentionCache::create(config, config.n_blocks(), 8, Device::kCpu).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(AttentionCache::create(config, 0, 0, Device::kCpu).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(AttentionCache::create(config, 0, 8, Device::kCpu, 0).status().code(),
            StatusCode::kInvalidArgument);
  checkpoint::ModelConfig no_ratio = config;
  no_ratio.layers[0].compress_ratio = 0;  // layer 0 of tiny_b is CSA
  EXPECT_EQ(AttentionCache::create(no_ratio, 0, 8, Device::kCpu).status().code(),
            StatusCode::kInvalidArgument);

  auto cache = AttentionCache::create(config, 0, 4, Device::kCpu);
  ASSERT_TRUE(cache.ok()) << cache.status().to_string();
  const Tensor x = golden.input(0);
  Tensor out = Tensor::host(DType::kF32, x.shape());
  const auto& weights = golden.weights.layers[0].attn;
  // start_pos must be the number of tokens the cache holds.
  EXPECT_EQ(attention_forward(config, 0, weights, x.view().rows(0, 2), 1, cache.value(),
                              out.view().rows(0, 2))
                .code(),
            StatusCode::kInvalidArgument);
  // More tokens than the cache was made for.
  EXPECT_EQ(attention_forward(config, 0, weights, x.view().rows(0, 5), 0, cache.value(),
                              out.view().rows(0, 5))
                .code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(cache.value().n_tokens, 0);
  EXPECT_TRUE(attention_forward(config, 0, weights, x.view().rows(0, 4), 0, cache.value(),
                                out.view().rows(0, 4))
                  .ok());
  EXPECT_EQ(cache.value().n_tokens, 4);
}

INSTANTIATE_TEST_SUITE_P(Golden, AttentionGoldenTest,
                         ::testing::Values("tiny_a_pretrained", "tiny_b_state_dict",
                                           "tiny_d_state_dict", "tiny_e_pretrained"));

}  // namespace
}  // namespace dsv4::model

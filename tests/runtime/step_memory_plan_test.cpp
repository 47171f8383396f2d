// The step memory plan (runtime/step_memory_plan.h) against bytes derived by hand from
// V4-Flash's config (D 4096, M 4, H 64, Dh 512, q rank 1024, 64 indexer heads of 128, 8 groups
// of rank 1024, K 6, F 2048, E 256, V 129280, window 128, CSA ratio 4, HCA ratio 128, top-k
// 512) at a batch of 32 unless said, and the refusal it makes when a step does not fit. In a
// CUDA build the experts' part is also held against the MoE kernel's own workspace plan, which
// must not need more than the plan counts.
#include "runtime/step_memory_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "checkpoint/config.h"
#include "dsv4/engine.h"
#include "format/text_file.h"
#include "kernels/ops.h"
#include "runtime/placement.h"
#include "testing/source_dir.h"

namespace dsv4::runtime {
namespace {

checkpoint::ModelConfig flash() {
  const std::string path = testing::source_path("tests/checkpoint/fixtures/v4_flash_config.json");
  auto text = format::read_text_file(path);
  EXPECT_TRUE(text.ok()) << text.status().to_string();
  auto config = checkpoint::parse_model_config(text.value(), path);
  EXPECT_TRUE(config.ok()) << config.status().to_string();
  return *config;
}

// Bytes a token, by hand, at V4-Flash's shapes.
constexpr int64_t kLogitsRow = 4 * 129280;
constexpr int64_t kStreamsPerToken = 2 * 4 * 4 * 4096;
constexpr int64_t kKeptStreamsPerToken = 4 * 4 * 4096;
constexpr int64_t kLayerPerToken = 2 * 4 * 4096;
// q latent 4·1024, q and o 2·4·64·512, K=V row 4·512, indexer q and weights 4·64·(128 + 1),
// the compressors' kv and gate rows 2·4·2·(512 + 128) and the attention compressor's stream of
// them 2·4·2·512, wo_a's output 4·8·1024, its FP8 input 64·512 bytes and a scale per 128, the FP8
// block input and query latent 4096 + 1024 bytes and a scale per 128.
constexpr int64_t kAttentionPerToken =
    4096 + 262144 + 2048 + 33024 + 10240 + 8192 + 32768 + 32768 + 1024 + 4096 + 128 + 1024 + 32;
// moe_ffn's workspace, 7 rows a token (6 routed, the shared one): router logits 4·256,
// selections 2·4·7, row maps 2·4·7; bf16 rows 2·7·4096, NVFP4 tokens 4096/2 + 4096/16, NVFP4 rows
// 7·(4096/2 + 4096/16); gate-up 4·7·4096, SwiGLU 4·7·2048 and its NVFP4 7·(2048/2 + 2048/16),
// down 4·7·4096. The shared expert beside it: f32 output, gate-up and hidden 4·(4096 + 3·2048),
// their FP8 staging 4096 + 2048 bytes and a scale per 128.
constexpr int64_t kMoePerToken =
    (1024 + 56 + 56) + (57344 + 2048 + 256 + 14336 + 1792) + (114688 + 57344 + 7168 + 896 + 114688);
constexpr int64_t kSharedPerToken = 40960 + 6144 + 192;
constexpr int64_t kMoeSlack = int64_t{16} << 20;
// A decode run's attention run a head: an f32 partial of 512 dims and an f32 max and sum.
constexpr int64_t kRunBytesAHead = 4 * 512 + 8;

StepShape shape(int64_t tokens, int64_t context, int64_t batch = 32) {
  return {.tokens = tokens, .max_context = context, .max_batch = batch};
}

TEST(StepMemoryPlan, CountsV4FlashByHand) {
  const checkpoint::ModelConfig c = flash();
  for (const int64_t t : {int64_t{1}, int64_t{2048}, int64_t{8192}, int64_t{16384}}) {
    SCOPED_TRACE(std::to_string(t) + " tokens");
    const int64_t context = 4096;
    const StepMemoryPlan plan = plan_step_memory(c, shape(t, context));
    EXPECT_EQ(plan.step_tokens, t);
    // Device logits: the decode runs' rows, 8 a sequence of 32, and (for a step longer than a
    // decode run) the head's 256-row slab for a chunk's host logits.
    const int64_t rows = std::min<int64_t>(t, 8 * 32) + (t > 8 ? std::min<int64_t>(t, 256) : 0);
    EXPECT_EQ(plan.logits, rows * kLogitsRow);
    EXPECT_EQ(plan.kept_streams, 0);
    EXPECT_EQ(plan.streams, t * kStreamsPerToken);
    EXPECT_EQ(plan.layer, t * kLayerPerToken);
    EXPECT_EQ(plan.attention, t * kAttentionPerToken);
    // One attention step of at most 256 rows of one sequence, or the decode rows (at most 256
    // too at a batch of 32): scores over 4096 / 4 entries and 512 picks, 4 bytes each.
    EXPECT_EQ(plan.indexer, std::min<int64_t>(t, 256) * 4 * (1024 + 512));
    EXPECT_EQ(plan.decode_runs, 0);  // the exact profile's attention keeps no runs
    EXPECT_EQ(plan.experts, t * (kMoePerToken + kSharedPerToken) + kMoeSlack);
    const int64_t half = std::max(plan.attention + plan.indexer, plan.experts);
    EXPECT_EQ(plan.total(), plan.logits + plan.streams + plan.layer + half);
  }
  // About 0.5 MiB a token beyond the logits' 512 rows (265 MB) and the experts' fixed
  // allowance: 2048 tokens about 1.3 GiB, 16384 about 8.5 GiB.
  const StepMemoryPlan step = plan_step_memory(c, shape(2048, 4096));
  EXPECT_EQ(step.total(),
            512 * kLogitsRow +
                2048 * (kStreamsPerToken + kLayerPerToken + kMoePerToken + kSharedPerToken) +
                kMoeSlack);
}

// A drafting sequence's chunk keeps its final streams for the MTP block through the step.
TEST(StepMemoryPlan, SpeculationKeepsTheStepsStreams) {
  const checkpoint::ModelConfig c = flash();
  StepShape drafting = shape(2048, 4096);
  drafting.speculative_tokens = 2;
  const StepMemoryPlan plan = plan_step_memory(c, drafting);
  EXPECT_EQ(plan.kept_streams, 2048 * kKeptStreamsPerToken);
  EXPECT_EQ(plan.total(), plan_step_memory(c, shape(2048, 4096)).total() + plan.kept_streams);
}

TEST(StepMemoryPlan, IndexerScoresSpanTheContext) {
  const checkpoint::ModelConfig c = flash();
  const StepMemoryPlan plan = plan_step_memory(c, shape(2048, int64_t{1} << 20));
  EXPECT_EQ(plan.indexer, 256 * 4 * ((int64_t{1} << 18) + 512));
  // At a batch of 64 the decode rows (8 a sequence) outnumber an attention step's 256.
  const StepMemoryPlan wide = plan_step_memory(c, shape(2048, int64_t{1} << 20, 64));
  EXPECT_EQ(wide.indexer, 512 * 4 * ((int64_t{1} << 18) + 512));
}

// The fast profile splits a decode row's attention into runs of 32 candidates: at a context of
// 4096 a CSA layer has its 128-row window and 512 picks (20 runs), an HCA layer its window and
// 4096 / 128 entries (5); at 2^20 the HCA layer's 8192 entries make 260. Decode rows go through
// in launches of at most 256 MiB of runs: 102 rows of 20 runs, 7 of 260, so the runs stay
// bounded at any context.
TEST(StepMemoryPlan, CountsTheFastDecodeRuns) {
  const checkpoint::ModelConfig c = flash();
  StepShape fast = shape(2048, 4096);
  fast.numerics = Numerics::kFast;
  const int64_t rows = 8 * 32, cap = int64_t{256} << 20;
  const int64_t csa_row = 20 * 64 * kRunBytesAHead, hca_row = 260 * 64 * kRunBytesAHead;
  ASSERT_EQ(cap / csa_row, 102);
  ASSERT_EQ(cap / hca_row, 7);
  const StepMemoryPlan plan = plan_step_memory(c, fast);
  EXPECT_EQ(plan.decode_runs, 102 * csa_row + rows * 4 * 512);
  EXPECT_EQ(plan.total(),
            plan.logits + plan.streams + plan.layer +
                std::max(plan.attention + std::max(plan.indexer + plan.rows_copy, plan.decode_runs),
                         plan.experts));
  // At 2^20 an HCA layer's launch of 7 rows (239 MB) stays below the CSA layer's 102 and their
  // picks.
  fast.max_context = int64_t{1} << 20;
  EXPECT_EQ(plan_step_memory(c, fast).decode_runs, 102 * csa_row + rows * 4 * 512);
  EXPECT_LT(7 * hca_row, 102 * csa_row);
  // One sequence: its chunk of up to 8 decode rows, all in one launch at 4096 positions.
  fast.max_batch = 1;
  fast.max_context = 4096;
  EXPECT_EQ(plan_step_memory(c, fast).decode_runs, 8 * csa_row + 8 * 4 * 512);
}

// A prompt's fast attention rounds its rows to bf16 first: the window ring of 128 + 256 − 1
// rows and, at 4096 positions, a CSA layer's 1024 entries, 1 KiB a row at V4's head dim of 512.
// At 2^20 positions the 262144 entries would take 256 MiB: the copy stops at 64 MiB (the
// kernel then reads the f32 rows). Its indexer quantizes the 1024 keys and a 256-row step's
// 64 head rows each, 128 E4M3 bytes and a 4-byte scale or weight a row, beside the scores.
// The exact profile copies nothing.
TEST(StepMemoryPlan, CountsTheFastPromptsCopies) {
  const checkpoint::ModelConfig c = flash();
  StepShape fast = shape(2048, 4096);
  fast.numerics = Numerics::kFast;
  const StepMemoryPlan plan = plan_step_memory(c, fast);
  EXPECT_EQ(plan.rows_copy, (383 + 1024) * 1024);
  EXPECT_EQ(plan.indexer, 256 * 4 * (1024 + 512) + (1024 + 256 * 64) * 132);
  fast.max_context = int64_t{1} << 20;
  EXPECT_EQ(plan_step_memory(c, fast).rows_copy, int64_t{64} << 20);
  EXPECT_EQ(plan_step_memory(c, shape(2048, 4096)).rows_copy, 0);
}

// A setup whose free memory fits the step's asked logits rows opens, where counting every row's
// logits (4 · T · V) refused it: at 8192 tokens that was 3.7 GiB more than the step holds.
TEST(StepMemoryPlan, FitsWhatTheAskedLogitsRowsLeave) {
  const StepMemoryPlan plan = plan_step_memory(flash(), shape(8192, 4096));
  const int64_t prefix = int64_t{1} << 30;
  const int64_t free = plan.total() + prefix;
  EXPECT_TRUE(check_step_fits(plan, free, prefix).ok());
  StepMemoryPlan every_row = plan;
  every_row.logits = 8192 * kLogitsRow;
  EXPECT_EQ(every_row.total() - plan.total(), (8192 - 512) * kLogitsRow);
  EXPECT_EQ(check_step_fits(every_row, free, prefix).code(), StatusCode::kResourceExhausted);
}

TEST(StepMemoryPlan, RefusesAStepTheDeviceCannotHold) {
  const StepMemoryPlan plan = plan_step_memory(flash(), shape(16384, 4096));
  const int64_t prefix = int64_t{1} << 30;
  EXPECT_TRUE(check_step_fits(plan, plan.total() + prefix, prefix).ok());
  const Status refused = check_step_fits(plan, plan.total() + prefix - 1, prefix);
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  for (const std::string& part :
       {std::string("--max-step-tokens 16384: "), std::to_string(plan.total()) + " bytes needed",
        std::to_string(plan.total() - 1) + " left", std::string("the prefix cache's 1.00 GiB"),
        std::string("lower --max-step-tokens")}) {
    EXPECT_NE(refused.message().find(part), std::string::npos) << part << "\n" << refused.message();
  }
  // Less free than the prefix cache alone: nothing left, said as 0, not a negative count.
  const Status none = check_step_fits(plan, prefix / 2, prefix);
  EXPECT_NE(none.message().find(" 0 left"), std::string::npos) << none.message();
}

TEST(StepMemoryPlan, EngineOptionsPlanNoMoreThanABatchCanFeed) {
  const checkpoint::ModelConfig c = flash();
  EngineOptions options;
  options.max_batch = 2;
  options.max_context = 1000;
  options.max_step_tokens = 16384;
  // Two sequences of 1000 positions never feed more than 2000 tokens a step.
  EXPECT_EQ(plan_step_memory(options, c).total(),
            plan_step_memory(c, shape(2000, 1000, 2)).total());
  // The options' speculation and profile reach the plan.
  options.speculative_tokens = 2;
  options.numerics = Numerics::kFast;
  StepShape asked = shape(2000, 1000, 2);
  asked.speculative_tokens = 2;
  asked.numerics = Numerics::kFast;
  EXPECT_EQ(plan_step_memory(options, c).total(), plan_step_memory(c, asked).total());
  options.speculative_tokens = 0;
  options.numerics = Numerics::kExact;
  options.max_context = 4096;
  EXPECT_EQ(plan_step_memory(options, c).step_tokens, 8192);
  options.max_context = 16384;
  EXPECT_EQ(plan_step_memory(options, c).step_tokens, 16384);
  // The placement leaves the larger of the fixed margin and the step's plan beside the prefix
  // cache.
  options.prefix_cache_mb = 1;
  EXPECT_EQ(device_placement(options, 1).device_headroom, (1 << 20) + kStepHeadroomBytes);
  const int64_t step = plan_step_memory(options, c).total();
  ASSERT_GT(step, kStepHeadroomBytes);
  EXPECT_EQ(device_placement(options, step).device_headroom, (1 << 20) + step);
}

// The MoE kernel's workspace (kernels/cuda/moe/workspace.cpp) within the plan's experts' part
// at every step size: built with CUDA only (the CPU op allocates its own). Shapes alone: the
// workspace plan reads no data.
TEST(StepMemoryPlan, HoldsTheMoeKernelsWorkspace) {
  const checkpoint::ModelConfig c = flash();
  kernels::MoeWeightsView w;
  w.gate = TensorView::contiguous(nullptr, DType::kF32, Device::kCuda,
                                  {c.n_routed_experts, c.hidden_size});
  w.w2.packed =
      TensorView::contiguous(nullptr, DType::kU8, Device::kCuda,
                             {c.n_routed_experts, c.hidden_size, c.moe_intermediate_size / 2});
  const kernels::MoeConfig cfg{.n_expert_used = static_cast<int>(c.n_expert_used)};
  if (kernels::moe_ffn_workspace_bytes(1, w, cfg) == 0) {
    GTEST_SKIP() << "a build without CUDA: the CPU MoE allocates its own scratch";
  }
  for (const int64_t t : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{2048}, int64_t{16384}}) {
    const int64_t kernel = kernels::moe_ffn_workspace_bytes(t, w, cfg);
    const StepMemoryPlan plan = plan_step_memory(c, shape(t, 4096));
    EXPECT_LE(kernel, plan.experts - t * kSharedPerToken) << t << " tokens";
    // Counted buffer for buffer: the plan is above by its allowance for alignment and the
    // router's splits at most.
    EXPECT_GE(kernel + kMoeSlack, plan.experts - t * kSharedPerToken) << t << " tokens";
  }
}

}  // namespace
}  // namespace dsv4::runtime

#include "runtime/step_memory_plan.h"

#include <algorithm>
#include <cstdio>

#include "kernels/ops.h"
#include "model/attention_cache.h"
#include "model/deepseek_v4.h"

namespace dsv4::runtime {
namespace {

constexpr int64_t kF32 = 4;
constexpr int64_t kBf16 = 2;

// The router's split logits at a few tokens (moe/workspace.cpp pick_logit_splits: at most 264
// blocks of 128 × 128 or 528 of 64 × 64 f32 partial logits, 8.6 MB) and the workspace's
// 256-byte alignment of its buffers: a fixed allowance on top of the per-token bytes.
constexpr int64_t kMoeWorkspaceSlackBytes = int64_t{16} << 20;

// moe_ffn's workspace for T tokens (kernels/cuda/moe/workspace.cpp plan_workspace, buffer for
// buffer): S = T·(K + 1) rows, the routed ones and the shared expert's.
int64_t moe_workspace_bytes(const checkpoint::ModelConfig& c, int64_t t) {
  const int64_t d = c.hidden_size, f = c.moe_intermediate_size, e = c.n_routed_experts;
  const int64_t s = t * (c.n_expert_used + 1);
  const int64_t routing = kF32 * t * e                            // router logits
                          + 2 * kF32 * t * (c.n_expert_used + 1)  // selected experts, weights
                          + 2 * kF32 * s;                         // row ↔ token maps
  const int64_t inputs = 2 * s * d                                // bf16 rows
                         + t * d / 2 + t * d / 16                 // NVFP4 tokens and block scales
                         + s * d / 2 + s * d / 16;                // NVFP4 rows and block scales
  const int64_t ffn = kF32 * s * 2 * f                            // gate-up
                      + kF32 * s * f                              // SwiGLU output
                      + s * f / 2 + s * f / 16                    // its NVFP4 codes and scales
                      + kF32 * s * d;                             // down
  return routing + inputs + ffn + kMoeWorkspaceSlackBytes;
}

// The attention half's tensors for T rows (attention.cpp attention_step, indexer.cpp
// indexer_queries, compressor.cpp's projected rows and the stream a prompt's rows pool from,
// project_output's wo_a and the FP8 staging of its input, linear.cpp: a byte a value and an f32
// scale per 128).
int64_t attention_bytes(const checkpoint::ModelConfig& c, int64_t t) {
  const int64_t heads = c.n_head * c.head_dim;
  // The compressors' kv and gate rows are overlapped (two halves a row): 2 · 2 · width each,
  // and the attention compressor's stream of a prompt's rows as much again (2 · head_dim).
  const int64_t per_row = kF32 * c.q_lora_rank                               // query latent
                          + 2 * kF32 * heads                                 // queries, output
                          + kF32 * c.head_dim                                // K = V row
                          + kF32 * c.index_n_heads * (c.index_head_dim + 1)  // indexer q, weights
                          + 2 * kF32 * 2 * (2 * c.head_dim + c.index_head_dim)  // compressors
                          + kF32 * c.o_groups * c.o_lora_rank                   // wo_a's output
                          + (heads + kF32 * heads / 128)                        // wo_a's FP8 input
                          // The fast profile's FP8 copies of the block input (wq_a, wkv) and of
                          // the query latent (wq_b, the indexer's wq_b), held through the half.
                          + c.hidden_size + kF32 * c.hidden_size / 128 + c.q_lora_rank +
                          kF32 * c.q_lora_rank / 128;
  return t * per_row;
}

// The rows of a step's decode runs (attention.cpp is_decode_run: chunks of up to kMaxDecodeRun
// rows, in one launch an op): every sequence's at most.
int64_t decode_rows(const StepShape& shape) {
  return std::min(shape.tokens, model::AttentionCache::kMaxDecodeRun * shape.max_batch);
}

// The compressed entries a cache of max_context positions holds at `ratio`.
int64_t entries(int64_t max_context, int64_t ratio) { return (max_context + ratio - 1) / ratio; }

// The indexer's scores f32 [rows, C] and picks i32 [rows, top-k], C the entries of the finest
// CSA compressor at max_context, for the more rows of one sequence step's (at most Ts:
// attention.cpp runs a long sequence Ts tokens at a time) and the decode rows'
// (indexer_decode_rows); none without CSA layers.
int64_t indexer_bytes(const checkpoint::ModelConfig& c, const StepShape& shape) {
  int64_t ratio = 0;
  for (int64_t layer = 0; layer < c.n_layer; ++layer) {
    const checkpoint::LayerSchedule& s = c.schedule(layer);
    if (s.attention != checkpoint::AttentionType::kCompressedSparse) continue;
    ratio = ratio == 0 ? s.compress_ratio : std::min(ratio, s.compress_ratio);
  }
  if (ratio <= 0) return 0;
  const int64_t step_rows = std::min(shape.tokens, model::AttentionCache::kDefaultStepTokens);
  const int64_t rows = std::max(step_rows, decode_rows(shape));
  const int64_t n = entries(shape.max_context, ratio);
  // The fast profile's quantized keys and query head rows of a sequence step (its decode rows
  // read their keys where they lie).
  const int64_t quantized = shape.numerics == Numerics::kFast
                                ? (n + step_rows * c.index_n_heads) * kernels::kIndexerFp8RowBytes
                                : 0;
  return rows * kF32 * (n + std::min(c.index_topk, n)) + quantized;
}

// The fast profile's decode attention runs (kernels/ops.h sparse_attention_bf16: a run per 32
// candidates, in launches of at most kAttentionRunsMaxBytes), at the layer with the most
// candidates (its window, and the top-k picks of a CSA layer, or every entry of an HCA layer's
// cache), with a CSA layer's picks i32 [rows, top-k] held beside them. The exact profile's
// kernel keeps no runs.
int64_t decode_runs_bytes(const checkpoint::ModelConfig& c, const StepShape& shape) {
  if (shape.numerics != Numerics::kFast) return 0;
  const int64_t rows = decode_rows(shape);
  int64_t most = 0;
  for (int64_t layer = 0; layer < c.n_layer; ++layer) {
    const checkpoint::LayerSchedule& s = c.schedule(layer);
    int64_t extra = 0, picks = 0;
    if (s.attention == checkpoint::AttentionType::kCompressedSparse) {
      extra = std::min(c.index_topk, entries(shape.max_context, s.compress_ratio));
      picks = rows * kF32 * extra;
    } else if (s.compress_ratio > 0) {
      extra = entries(shape.max_context, s.compress_ratio);
    }
    const int64_t per_row = kernels::attention_runs_bytes_a_row(c.sliding_window + extra, c.n_head);
    const int64_t a_launch =
        std::min(rows, std::max<int64_t>(1, kernels::kAttentionRunsMaxBytes / per_row));
    most = std::max(most, a_launch * per_row + picks);
  }
  return most;
}

// The fast profile's bf16 copy of a prompt attention's rows (kernels/ops.h sparse_attention_bf16):
// a sequence's window ring and the compressed entries of the layer that keeps the most, each
// row of the head dim rounded up to 8 values; a call whose copy would pass
// kAttentionCopyMaxBytes reads its f32 rows instead.
int64_t rows_copy_bytes(const checkpoint::ModelConfig& c, const StepShape& shape) {
  if (shape.numerics != Numerics::kFast) return 0;
  int64_t most_entries = 0;
  for (int64_t layer = 0; layer < c.n_layer; ++layer) {
    const int64_t ratio = c.schedule(layer).compress_ratio;
    if (ratio > 0) most_entries = std::max(most_entries, entries(shape.max_context, ratio));
  }
  const int64_t ring = c.sliding_window + model::AttentionCache::kDefaultStepTokens - 1;
  const int64_t row = kBf16 * ((c.head_dim + 7) / 8 * 8);
  return std::min(kernels::kAttentionCopyMaxBytes, (ring + most_entries) * row);
}

// The logits rows on the device: the decode runs' (runtime/session.cpp asks a longer chunk's in
// host memory) and, when a chunk may be longer, the head's slab for host rows beside them.
int64_t logits_bytes(const checkpoint::ModelConfig& c, const StepShape& shape) {
  const int64_t t = shape.tokens;
  const int64_t slab =
      t > model::AttentionCache::kMaxDecodeRun ? std::min(t, model::kHostLogitsSlabRows) : 0;
  return kF32 * (decode_rows(shape) + slab) * c.vocab_size;
}

// The shared expert beside the routed ones (moe.cpp moe_forward): its output f32 [T, D], its
// gate-up [T, 2F] and hidden [T, F] rows, and their FP8 staging.
int64_t shared_expert_bytes(const checkpoint::ModelConfig& c, int64_t t) {
  const int64_t d = c.hidden_size, f = c.moe_intermediate_size;
  return t * (kF32 * (d + 3 * f) + d + f + kF32 * (d + f) / 128);
}

std::string gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

std::string parts(const StepMemoryPlan& p) {
  return "logits " + gib(p.logits) + ", streams " + gib(p.streams + p.kept_streams) +
         ", a layer's input and output " + gib(p.layer) + ", attention " +
         gib(p.attention + std::max(p.indexer + p.rows_copy, p.decode_runs)) + " or experts " +
         gib(p.experts);
}

}  // namespace

int64_t StepMemoryPlan::total() const {
  return logits + kept_streams + streams + layer +
         std::max(attention + std::max(indexer + rows_copy, decode_runs), experts);
}

StepMemoryPlan plan_step_memory(const checkpoint::ModelConfig& config, const StepShape& shape) {
  const int64_t t = shape.tokens;
  const int64_t streams = kF32 * t * config.hc_mult * config.hidden_size;
  return {.step_tokens = t,
          .logits = logits_bytes(config, shape),
          .kept_streams = shape.speculative_tokens > 0 ? streams : 0,
          .streams = 2 * streams,
          .layer = 2 * kF32 * t * config.hidden_size,
          .attention = attention_bytes(config, t),
          .indexer = indexer_bytes(config, shape),
          .decode_runs = decode_runs_bytes(config, shape),
          .rows_copy = rows_copy_bytes(config, shape),
          .experts = moe_workspace_bytes(config, t) + shared_expert_bytes(config, t)};
}

Status check_step_fits(const StepMemoryPlan& plan, int64_t free_bytes, int64_t prefix_cache_bytes) {
  const int64_t left = free_bytes - prefix_cache_bytes;
  if (plan.total() <= left) return ok_status();
  return resource_exhausted(
      "--max-step-tokens " + std::to_string(plan.step_tokens) + ": a step of that many tokens " +
      "needs " + gib(plan.total()) + " of device memory (" + parts(plan) + "), and the device " +
      "has " + gib(free_bytes) + " free after the weights, less the prefix cache's " +
      gib(prefix_cache_bytes) + " (" + std::to_string(plan.total()) + " bytes needed, " +
      std::to_string(std::max<int64_t>(left, 0)) + " left): lower --max-step-tokens, or " +
      "--prefix-cache-mb, or keep more experts in host memory (--expert-offload)");
}

std::string describe(const StepMemoryPlan& plan) {
  return "a step of up to " + std::to_string(plan.step_tokens) + " tokens (--max-step-tokens) " +
         "plans " + gib(plan.total()) + " of device memory (" + parts(plan) + ")";
}

}  // namespace dsv4::runtime

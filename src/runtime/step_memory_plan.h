// The device memory one forward of up to EngineOptions::max_step_tokens tokens allocates, from
// the config alone, so the engine can refuse a step size its GPU cannot hold at open (naming
// --max-step-tokens and the bytes) instead of running out of memory in the middle of a request.
//
// The bytes count what the code allocates while a step runs (model/deepseek_v4.cpp forward_rows
// and head_rows, layer.cpp, attention.cpp, moe.cpp, kernels/cuda/moe/workspace.cpp
// plan_workspace, kernels/cuda/attention/sparse_attention_bf16.cu's runs, runtime/session.cpp's
// logits and kept streams), at the moment of its peak:
//   - the logits the step's chunks ask on the device, f32 [n, V], held from before the forward to
//     its end: a chunk of up to kMaxDecodeRun rows asks them there (one row a sequence to
//     decode, a verify step's k + 1, a short chunk's every row), so n ≤ kMaxDecodeRun · B; a
//     longer chunk that asks every row (echo with logprobs, dsv4 eval) takes them in host memory
//     through one device slab of kHostLogitsSlabRows rows beside them;
//   - with speculative decoding, the final streams the step keeps for the MTP block, f32
//     [T, M, D] (every row of a drafting sequence's chunk);
//   - the residual streams and their spare, f32 [T, M, D] each, held for the whole forward;
//   - within a layer, its input and output f32 [T, D], and the larger of its two halves:
//     attention (queries and output f32 [T, H, Dh], the query latent, the K=V row, the
//     indexer's queries, the compressors' projected rows, wo_a's grouped output and the FP8
//     staging of wo_a's input) with the larger of the indexer's scores (one sequence step's, at
//     most Ts rows, or the decode rows', at most kMaxDecodeRun · B, over the context's entries;
//     in the fast profile with a sequence step's E4M3 keys and query head rows)
//     and, in the fast profile, the decode rows' attention runs (sparse_attention_bf16 splits a
//     decode row into runs of 32 candidates, each an f32 [H, 512] partial and an f32 [H] max
//     and sum, over the window and the layer's compressed candidates: the top-k picks, or every
//     entry of an HCA layer, max_context / ratio; kAttentionRunsMaxBytes a launch at most,
//     unless one row takes more), and beside the indexer's a prompt's attention rounds its
//     rows to bf16 (the window ring, W + Ts − 1 rows, and the layer's compressed entries, at
//     most max_context / ratio; kAttentionCopyMaxBytes at most); or the experts (moe_ffn's
//     workspace for T tokens, T·(K + 1)
//     rows, and the shared expert's output, gate-up and hidden rows beside it);
//   - after the layers, the head's input f32 [T, D] (less than a layer's peak at any T).
// Not counted: the sequences' caches (they grow with the requests), the prefix cache (its own
// budget, EngineOptions::prefix_cache_mb), the decode graphs (planned at open on their own),
// small index tables, the kernels' own small call scratch (a prompt's attention runs: fewer
// than 2 · SMs runs of a row in all, 35 MB at 132 SMs and 64 heads; the top-k's keys, a few
// MB), the MTP block's draft after the step, and expert offload's copy of one layer's touched
// experts (a fixed amount a step, left free by the offload plan's headroom).
//
// Dimension letters: T step tokens, B sequences a step (max_batch), M streams, D model width,
// H heads, Dh head dim, K experts per token, F expert FFN width, E routed experts, V vocab,
// Ts attention step tokens, k speculative tokens.
#pragma once

#include <cstdint>
#include <string>

#include "checkpoint/config.h"
#include "dsv4/numerics.h"
#include "dsv4/status.h"

namespace dsv4::runtime {

// What a step runs over: the engine's options that size it.
struct StepShape {
  int64_t tokens = 0;              // T: at most max_step_tokens
  int64_t max_context = 0;         // a sequence's positions (the caches' compressed entries)
  int64_t max_batch = 1;           // B: sequences a step
  int64_t speculative_tokens = 0;  // k: drafts a sequence verifies (0: no speculation)
  Numerics numerics = Numerics::kExact;
};

struct StepMemoryPlan {
  int64_t step_tokens = 0;   // T: the step size the plan is for
  int64_t logits = 0;        // the device's logits rows and the host logits' slab, f32 V a row
  int64_t kept_streams = 0;  // with speculation, the final streams kept, f32 [T, M, D]
  int64_t streams = 0;       // the streams and their spare, f32 [T, M, D] twice
  int64_t layer = 0;         // a layer's input and output, f32 [T, D] twice
  int64_t attention = 0;     // the attention half's own tensors
  int64_t indexer = 0;       // the indexer's scores and picks, a sequence step's or decode rows'
  int64_t decode_runs = 0;   // the fast profile's decode attention runs and the rows' picks
  int64_t rows_copy = 0;     // the fast profile's bf16 copy of a prompt attention's rows
  int64_t experts = 0;       // the FFN half's: moe_ffn's workspace and the shared expert's rows
  // The peak: logits and streams throughout, and the larger half of a layer beside them.
  int64_t total() const;
};

StepMemoryPlan plan_step_memory(const checkpoint::ModelConfig& config, const StepShape& shape);

// The plan against the device memory free once the weights (and the decode graphs) are in place,
// less the prefix cache's budget: resource_exhausted names --max-step-tokens, the bytes the
// step needs by part and those free, and what to lower.
Status check_step_fits(const StepMemoryPlan& plan, int64_t free_bytes, int64_t prefix_cache_bytes);

// One line for the engine's load notes: the step size and what a step of it holds.
std::string describe(const StepMemoryPlan& plan);

}  // namespace dsv4::runtime

// The device memory one forward of up to EngineOptions::max_step_tokens tokens allocates, from
// the config alone, so the engine can refuse a step size its GPU cannot hold at open (naming
// --max-step-tokens and the bytes) instead of running out of memory in the middle of a request.
//
// The bytes count what the code allocates while a step runs (model/deepseek_v4.cpp forward_rows,
// layer.cpp, attention.cpp, moe.cpp, kernels/cuda/moe/workspace.cpp plan_workspace,
// runtime/session.cpp's logits), at the moment of its peak:
//   - the logits the step's chunks asked for, f32 [n, V], held from before the forward to its
//     end: n is 1 a sequence, but every row of a prompt that asks its logits or logprobs (dsv4
//     verify, a server's echo with logprobs), so a full step's worth at most;
//   - the residual streams and their spare, f32 [T, M, D] each, held for the whole forward;
//   - within a layer, its input and output f32 [T, D], and the larger of its two halves:
//     attention (queries and output f32 [T, H, Dh], the query latent, the K=V row, the
//     indexer's queries, the compressors' projected rows, wo_a's grouped output and the FP8
//     staging of wo_a's input) with one sequence step's indexer scores (at most Ts rows of the
//     context's entries; attention.cpp runs a long sequence Ts tokens at a time); or the
//     experts (moe_ffn's workspace for T tokens, T·(K + 1) rows, and the shared expert's
//     output, gate-up and hidden rows beside it);
//   - after the layers, the head's input f32 [T, D] (less than a layer's peak at any T).
// Not counted: the sequences' caches (they grow with the requests), the prefix cache (its own
// budget, EngineOptions::prefix_cache_mb), the decode graphs (planned at open on their own),
// small index tables, the kernels' own call scratch (kernels/cuda/scratch.h: the attention's
// split partials and the top-k's keys, sized by one attention step's rows, not the step's), and
// expert offload's copy of one layer's touched experts (a fixed amount a step, left free by the
// offload plan's headroom).
//
// Dimension letters: T step tokens, M streams, D model width, H heads, Dh head dim, K experts per
// token, F expert FFN width, E routed experts, V vocab, Ts attention step tokens.
#pragma once

#include <cstdint>
#include <string>

#include "checkpoint/config.h"
#include "dsv4/status.h"

namespace dsv4::runtime {

struct StepMemoryPlan {
  int64_t step_tokens = 0;  // T: the step size the plan is for
  int64_t logits = 0;       // every row's logits, f32 [T, V]
  int64_t streams = 0;      // the streams and their spare, f32 [T, M, D] twice
  int64_t layer = 0;        // a layer's input and output, f32 [T, D] twice
  int64_t attention = 0;    // the attention half's own tensors
  int64_t indexer = 0;      // one sequence step's indexer scores and picks
  int64_t experts = 0;      // the FFN half's: moe_ffn's workspace and the shared expert's rows
  // The peak: logits and streams throughout, and the larger half of a layer beside them.
  int64_t total() const;
};

// A forward of `step_tokens` tokens of sequences of up to `max_context` positions (the indexer's
// scores span the context's compressed entries).
StepMemoryPlan plan_step_memory(const checkpoint::ModelConfig& config, int64_t step_tokens,
                                int64_t max_context);

// The plan against the device memory free once the weights (and the decode graphs) are in place,
// less the prefix cache's budget: resource_exhausted names --max-step-tokens, the bytes the
// step needs by part and those free, and what to lower.
Status check_step_fits(const StepMemoryPlan& plan, int64_t free_bytes, int64_t prefix_cache_bytes);

// One line for the engine's load notes: the step size and what a step of it holds.
std::string describe(const StepMemoryPlan& plan);

}  // namespace dsv4::runtime

// The attention half of a DeepSeek-V4 layer (../shared/docs/deepseek_v4.md §2.4): low-rank query
// with per-head unweighted RMSNorm, one shared K=V head, interleaved RoPE on the trailing dims,
// the sliding window with per-head sinks, and on compressed layers the compressor (CSA overlap
// ratio 4 / HCA) and the lightning indexer; inverse RoPE on the output; grouped output
// projection. Processes T new tokens of one sequence against its cache.
//
// Dimension letters: T new tokens, D model width, H heads, Dh head dim.
#pragma once

#include <cstdint>

#include "base/tensor.h"
#include "checkpoint/weights.h"
#include "dsv4/status.h"
#include "model/attention_cache.h"

namespace dsv4::model {

// x:   [T, D] f32, the attn_norm'ed block input of tokens at positions start_pos .. start_pos+T-1.
// out: [T, D] f32.
// Appends the T tokens to `cache` (window ring, compressor partial state, compressed entries,
// indexer keys), so prefill and decode are the same call with different T.
Status attention_forward(const checkpoint::ModelConfig& config, int64_t layer,
                         const checkpoint::AttentionWeights& weights, const TensorView& x,
                         int64_t start_pos, AttentionCache& cache, const TensorView& out);

}  // namespace dsv4::model

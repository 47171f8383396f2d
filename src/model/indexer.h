// The lightning indexer of CSA layers (transformers' DeepseekV4Indexer, the official Indexer;
// ../shared/docs/deepseek_v4.md §2.4.5): its own overlapped compressor at width DI gives one
// key per block of m tokens; queries come from the attention's q latent; each query keeps the
// index_topk entries of highest Σ_h w_h·ReLU(q_h·k), among the entries whose block it has seen.
//
// Dimension letters: T new tokens, D model width, Q q_lora_rank, HI/DI indexer heads/dim,
// K picks per query.
#pragma once

#include <cstdint>
#include <vector>

#include "base/buffer.h"
#include "checkpoint/config.h"
#include "checkpoint/weights.h"
#include "dsv4/numerics.h"
#include "dsv4/status.h"
#include "model/attention_cache.h"
#include "model/compressor.h"
#include "model/linear.h"

namespace dsv4::model {

// The per-token half of the indexer, which needs no cache: each token's queries and head
// weights. A step computes them once for all of its sequences' rows.
struct IndexerQueries {
  Tensor q;        // f32 [T, HI, DI]  rope(wq_b(q_latent)) at the token's position
  Tensor weights;  // f32 [T, HI]  weights_proj(x)
};

// x f32 [T, D] the attention's input, q_latent f32 [T, Q] = q_norm(wq_a(x)) (with its FP8 form
// where the norm made one), positions i64 [T], inv_freq f32 [P] the compress RoPE; the linears
// in profile `numerics`.
Result<IndexerQueries> indexer_queries(const checkpoint::ModelConfig& config,
                                       const checkpoint::IndexerWeights& weights,
                                       const TensorView& x, const LinearInput& q_latent,
                                       const TensorView& positions, const TensorView& inv_freq,
                                       Numerics numerics);

// What one attention step hands the indexer for one sequence's rows.
struct IndexerStep {
  CompressorInput rows;                  // the attention's input x f32 [T, D], for the indexer's
                                         // compressor (with its projections when made already)
  TensorView q;                          // f32 [T, HI, DI]  these rows' IndexerQueries
  TensorView head_weights;               // f32 [T, HI]
  TensorView positions;                  // i64 [T] on the device
  std::vector<int64_t> host_positions;   // i64 [T] on the host
  TensorView inv_freq;                   // f32 [P]  the compress RoPE
  Numerics numerics = Numerics::kExact;  // kFast on the GPU: indexer_scores_fp8
};

// The picks i32 [T, K] of one sequence's rows among the first n_entries entries of its indexer
// compressor (`cache`, fed these rows already: compressor_forward), K = min(index_topk,
// n_entries): indices of the attention compressor's entries (both compressors close the same
// blocks), −1 = none; each row picks among those complete at its position. K = 0 gives an
// empty tensor. A prompt's compressors are fed once for many pieces of rows, so n_entries (those
// the piece's last row can see) may be fewer than the cache holds; the rows' picks do not depend
// on it beyond that.
Result<Tensor> indexer_picks(const checkpoint::ModelConfig& config, const IndexerStep& step,
                             const CompressorCache& cache, int64_t n_entries);

// A step's decode rows (one token of each of T sequences), as compressor_forward and
// indexer_picks would run them one sequence at a time, in one launch an op for all: each row's
// token into its sequence's
// indexer compressor (`compressor`, the caches and their addresses), then each row's picks i32
// [T, K] among its own sequence's entries, K = min(index_topk, n_entries), −1 past a row's own;
// an empty tensor when n_entries = 0. n_entries: at least the most entries any row has after
// this token (that many, or the caches' capacity for a step of fixed shapes).
struct IndexerDecodeRows {
  CompressorDecodeRows compressor;
  TensorView q;             // f32 [T, HI, DI]  these rows' IndexerQueries
  TensorView head_weights;  // f32 [T, HI]
  TensorView inv_freq;      // f32 [P]  the compress RoPE
  Numerics numerics = Numerics::kExact;
};
Result<Tensor> indexer_decode_rows(const checkpoint::ModelConfig& config,
                                   const checkpoint::IndexerWeights& weights,
                                   const IndexerDecodeRows& rows, int64_t n_entries);

}  // namespace dsv4::model

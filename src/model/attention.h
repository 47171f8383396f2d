// The attention half of a DeepSeek-V4 layer (../shared/docs/deepseek_v4.md §2.4): low-rank query
// with per-head unweighted RMSNorm, one shared K=V head, interleaved RoPE on the trailing dims,
// the sliding window with per-head sinks, and on compressed layers the compressor (CSA overlap
// ratio 4 / HCA) and the lightning indexer; inverse RoPE on the output; grouped output
// projection. Processes T new tokens of one sequence against its cache, or of several sequences
// each against its own.
//
// Dimension letters: T new tokens, D model width, H heads, Dh head dim.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/tensor.h"
#include "checkpoint/weights.h"
#include "dsv4/numerics.h"
#include "dsv4/status.h"
#include "kernels/ops.h"
#include "model/attention_cache.h"
#include "model/rope.h"

namespace dsv4::model {

// The rows [begin, end) of a batch that belong to one sequence, its first position and cache.
struct SequenceRows {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t start_pos = 0;
  AttentionCache* cache = nullptr;  // this layer's cache of the sequence
  // When set, the state after the tokens before position snapshot_at (inside the rows) is copied
  // here: prefix caching's state after all but a prompt's last token, without a step of its own.
  AttentionCache* snapshot = nullptr;
  int64_t snapshot_at = 0;
};

// The buffers of a sequence's cache of one layer that a step's decode rows reach by address
// (kernels/ops.h, "Decode rows"): the window ring, and each compressor's kept rows, their gates,
// its entries and its journal's two buffers (compressor_journal.h; when armed), in that order
// (0 where the layer has none).
enum CacheBuffer : int64_t {
  kRing,
  kKvRows,
  kGateRows,
  kEntries,
  kKvJournal,
  kGateJournal,
  kIndexKvRows,
  kIndexGateRows,
  kIndexEntries,
  kIndexKvJournal,
  kIndexGateJournal,
  kCacheBuffers
};

// Whether a sequence's rows run with the step's decode rows: 1 to AttentionCache::kMaxDecodeRun
// of them (a decode token, a verify step's token and drafts; within its cache's step) and no
// snapshot. The decode rows reach their caches through a table with a column a row
// (address_columns: a sequence's own rows repeat its cache; any other sequence takes one).
bool is_decode_run(const SequenceRows& seq);
int64_t n_columns(const SequenceRows& seq);
std::vector<AttentionCache*> address_columns(std::span<const SequenceRows> sequences);

// Every layer's buffer addresses of each column, i64 [L, kCacheBuffers, S], `caches` [L · S]
// layer by layer (each column's cache of layer l at l · S + s).
Result<Tensor> cache_addresses(std::span<AttentionCache* const> caches, int64_t n_layers,
                               Device device);
// The same table on the host.
std::vector<int64_t> cache_address_values(std::span<AttentionCache* const> caches,
                                          int64_t n_layers);

// i32 [T, W] on the host: the ring rows of positions p − W + 1 … p of each row's query position
// p (−1 before 0), in the ring of the row's sequence (RowPositions::window_rows).
std::vector<int32_t> window_index_values(std::span<const SequenceRows> sequences,
                                         std::span<const int64_t> positions, int64_t window);

// The host side of decode rows over one layer's caches, a cache a row (a sequence's run of rows
// repeats its cache at consecutive positions: address_columns), without device work (a replayed
// decode graph's kernels do that): check_decode_step makes the checks attention_forward makes
// for these rows and changes nothing; advance_decode_step then moves each cache's counts past
// its rows, as attention_forward's decode rows do.
Status check_decode_step(const checkpoint::ModelConfig& config, int64_t layer,
                         std::span<AttentionCache* const> caches,
                         std::span<const int64_t> positions);
void advance_decode_step(std::span<AttentionCache* const> caches,
                         std::span<const int64_t> positions);

// What every layer's attention reads of a forward's rows and is the same in all of them: each
// row's position (on the host and on the device) and its window's ring rows (every layer's ring
// holds W + Ts − 1 rows). Made once a forward (Model::forward), not once a layer: two uploads a
// forward instead of two a layer; with the sequences' cache addresses of every layer, three.
struct RowPositions {
  std::vector<int64_t> host;  // [T]
  Tensor positions;           // i64 [T]
  Tensor window_rows;  // i32 [T, W]: ring rows of positions p − W + 1 … p (−1 before 0)
  std::vector<int64_t> n_ring_rows;  // [sequences]: the rings these rows were made for
  // cache_addresses of these sequences' columns (address_columns), or empty: a layer's decode
  // rows upload their own.
  Tensor cache_addresses;
  // The model's layer of cache_addresses' first (the MTP block's table holds its layer only).
  int64_t first_address_layer = 0;
  // When set, i32 [C] holding 0 … C − 1 for C at least every cache's entry capacity: decode
  // rows then take compressed sources (the indexer's scores and picks, the attention's extra
  // rows) as wide as their caches' capacity, not as the most entries a row has so far, so that
  // a step's shapes stay the same from one step to the next (a replayed graph's,
  // decode_graph.h); the padding adds exact zeros, so the bits are the same. Empty: as wide as
  // the rows' entries.
  TensorView capacity_entry_ids;
  // The layers' RoPE frequencies (the model's: the same tables whatever the sequences).
  std::shared_ptr<const RopeTables> rope;

  // For `sequences` (tiling [0, T) as attention_forward's) and their caches' rings, on `device`,
  // with `rope`, or with tables of its own when it is null.
  static Result<RowPositions> of(const checkpoint::ModelConfig& config,
                                 std::span<const SequenceRows> sequences, int64_t n_rows,
                                 Device device, std::shared_ptr<const RopeTables> rope = nullptr);
};

// x:   [T, D] f32, the attn_norm'ed block input of tokens at positions start_pos .. start_pos+T-1.
// out: [T, D] f32.
// Appends the T tokens to `cache` (window ring, compressor partial state, compressed entries,
// indexer keys), so prefill and decode are the same call with different T.
Status attention_forward(const checkpoint::ModelConfig& config, int64_t layer,
                         const checkpoint::AttentionWeights& weights, const TensorView& x,
                         int64_t start_pos, AttentionCache& cache, const TensorView& out);

// The same for a batch: x [T, D] holds the sequences' rows one after the other (`sequences`
// tile [0, T) in order; empty ones allowed), each attending over its own cache. The per-token
// projections (the compressors' included) run once for all the rows, so the attention weights
// are read once a step, not once a sequence, and a long prompt's projections are one GEMM each;
// a prompt longer than its cache's Ts attends Ts rows at a time, its compressors fed once (once
// before its snapshot's position and once after, when it keeps one).
// `numerics`: kFast runs the fast profile's sparse attention and indexer scores on the GPU
// (kernels/ops.h sparse_attention_bf16, indexer_scores_fp8); the CPU always runs the exact ops.
// The call makes its own RoPE tables (the model's forwards pass theirs through RowPositions).
Status attention_forward(const checkpoint::ModelConfig& config, int64_t layer,
                         const checkpoint::AttentionWeights& weights, const TensorView& x,
                         std::span<const SequenceRows> sequences, const TensorView& out,
                         Numerics numerics = Numerics::kExact);
// The same with the rows' positions made once for all layers (RowPositions::of over the same
// rows, with caches whose rings have the same rows as this layer's). x_fp8: x's FP8 form where
// the op that made x quantized it too (model/linear.h, LinearInput), which wq_a's and wkv's FP8
// GEMMs then read; else empty.
Status attention_forward(const checkpoint::ModelConfig& config, int64_t layer,
                         const checkpoint::AttentionWeights& weights, const TensorView& x,
                         std::span<const SequenceRows> sequences, const RowPositions& at,
                         const TensorView& out, Numerics numerics = Numerics::kExact,
                         const kernels::Fp8Activation& x_fp8 = {});

}  // namespace dsv4::model

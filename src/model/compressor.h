// The KV compressor of compressed attention layers (transformers' DeepseekV4HCACompressor and
// DeepseekV4CSACompressor, the official Compressor; ../shared/docs/deepseek_v4.md §2.4.4):
// every m tokens become one entry, a gated softmax pooling of their projected rows (on CSA
// overlapped with the previous block), RMS-normed and rotated at the block's first position.
//
// Dimension letters: T new tokens, D model width, m compress ratio, c halves, d entry width.
#pragma once

#include <span>

#include "base/tensor.h"
#include "checkpoint/weights.h"
#include "dsv4/numerics.h"
#include "dsv4/status.h"
#include "model/attention_cache.h"

namespace dsv4::model {

// A step's tokens projected by the compressor's two linears: kv = wkv(x), gate = wgate(x), each
// f32 [T, c·d]. A step of several sequences projects all its rows at once, so the weights (20 MB
// a CSA layer for V4-Flash's two compressors) are read once a step, not once a sequence.
struct CompressorRows {
  Tensor kv;
  Tensor gate;
};
Result<CompressorRows> project_compressor_rows(const checkpoint::CompressorWeights& weights,
                                               const TensorView& x, Numerics numerics);

// One sequence's new rows for compressor_forward: its tokens x f32 [T, D], which it projects
// into the cache's rows itself (a step of one sequence: no copy) in profile `numerics`, or the
// rows of a step's CompressorRows (kv and gate [T, c·d], copied in).
struct CompressorInput {
  TensorView x;
  TensorView kv;  // empty: project x
  TensorView gate;
  Numerics numerics = Numerics::kExact;  // ModelOptions::numerics
  int64_t n_tokens() const { return x.size(0); }
};

// Feeds the T tokens (the next ones of the sequence) to the compressor: appends the entries of
// every block they complete to cache.entries and keeps the rest in cache's rows. inv_freq f32
// [P] is the layer's compress RoPE.
Status compressor_forward(const checkpoint::CompressorWeights& weights,
                          const CompressorInput& input, const TensorView& inv_freq, float eps,
                          CompressorCache& cache);

// A step's decode rows (the next tokens of its sequences, a sequence's rows consecutive: a run
// of kernels::compressor_decode), each into its own sequence's compressor, as
// compressor_forward would feed them one token at a time, in one kernels::compressor_decode for
// all. An armed cache's run that pools writes its stream to its journal (compressor_journal.h).
struct CompressorDecodeRows {
  TensorView kv;  // f32 [T, c·d]  the rows' projections (CompressorRows)
  TensorView gate;
  TensorView kv_rows;    // i64 [T]  the sequences' buffers' addresses (cache_addresses)
  TensorView gate_rows;  // i64 [T]
  TensorView entries;    // i64 [T]
  TensorView kv_journal;    // i64 [T]  the journals' buffers' addresses (0: not armed)
  TensorView gate_journal;  // i64 [T]
  TensorView positions;  // i64 [T] on the device
  std::span<const int64_t> host_positions;
  std::span<CompressorCache* const> caches;  // [T], the buffers above
};
// compressor_decode_rows' host side: check_decode_slots checks each cache is where a decode row
// (a run's first) at its position expects it and has room for an entry the row completes
// (changing nothing); advance_decode_slots moves the host's counts past the rows, as the
// device's step moves them.
Status check_decode_slots(std::span<CompressorCache* const> caches,
                          std::span<const int64_t> positions);
void advance_decode_slots(std::span<CompressorCache* const> caches,
                          std::span<const int64_t> positions);

Status compressor_decode_rows(const checkpoint::CompressorWeights& weights,
                              const CompressorDecodeRows& rows, const TensorView& inv_freq,
                              float eps);

}  // namespace dsv4::model

// The KV compressor of compressed attention layers (transformers' DeepseekV4HCACompressor and
// DeepseekV4CSACompressor, the official Compressor; ../shared/docs/deepseek_v4.md §2.4.4):
// every m tokens become one entry, a gated softmax pooling of their projected rows (on CSA
// overlapped with the previous block), RMS-normed and rotated at the block's first position.
//
// Dimension letters: T new tokens, D model width, m compress ratio, c halves, d entry width.
#pragma once

#include "base/tensor.h"
#include "checkpoint/weights.h"
#include "dsv4/status.h"
#include "model/attention_cache.h"

namespace dsv4::model {

// Feeds the T tokens x [T, D] (the next ones of the sequence) to the compressor: appends the
// entries of every block they complete to cache.entries and keeps the rest in cache's rows.
// inv_freq f32 [P] is the layer's compress RoPE.
Status compressor_forward(const checkpoint::CompressorWeights& weights, const TensorView& x,
                          const TensorView& inv_freq, float eps, CompressorCache& cache);

}  // namespace dsv4::model

// Decoding a bound checkpoint tensor into the values the engine wants: the ONE code path that
// turns every stored form (dense f32/f16/bf16, FP8 + 128×128 e8m0/f32 scales, FP4 + e8m0 per 32,
// NVFP4 + e4m3 per 16 · global) into f32, and integer tables into i64. Every parameter goes
// through it, so a packed-FP4 `indexer.weights_proj` is unpacked exactly like a routed expert.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "checkpoint/binding.h"
#include "format/nvfp4.h"

namespace dsv4::checkpoint {

// What the post-load scan learns of a piece's values.
struct PieceScan {
  int64_t n_non_finite = 0;  // NaN or infinite
  bool all_zero = true;
};

// Writes piece.shape.numel() f32 values to `out`, or with `out` null only scans them (values
// kept packed, or a check that keeps nothing), and returns the scan. The piece must have passed
// validate_piece with a float or block-quantized form. The values are those of
// base/float_convert.h's codecs, element by element; the work runs in chunks of rows on
// parallel_for's threads.
PieceScan decode_to_f32(const BoundPiece& piece, float* out);
// The same for several pieces at once (a slot's: many small pieces share the threads), piece i
// into outs[i]; the scans in piece order.
std::vector<PieceScan> decode_to_f32(std::span<const BoundPiece* const> pieces,
                                     std::span<float* const> outs);

// Writes piece.shape.numel() i64 values to `out` (form kInteger).
void decode_to_i64(const BoundPiece& piece, int64_t* out);

// Copies an NVFP4 piece's raw bytes into matrices [first, first + n) of a stacked tensor whose
// rows the piece covers from `row` on (per-expert gate/up pieces fill half an expert's rows):
// packed codes, e4m3 block scales, global and input scale. The tensor has linear scales.
void copy_nvfp4_piece(const BoundPiece& piece, int64_t first_matrix, int64_t row,
                      format::Nvfp4Tensor& out);

}  // namespace dsv4::checkpoint

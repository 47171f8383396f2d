// Keeping a checkpoint's FP8 linears in FP8 (LoadOptions::keep_fp8, for a GPU): the e4m3 codes
// as stored and the 128 × 128 block scales as f32 (format/fp8_block.h), one byte a value where
// the bf16 they decode to takes two. The kernels decode them to exactly the values the host's
// decode gives (checkpoint/decode.cpp), so a slot is kept only where that holds for every value:
// every scale a power of two in [2^-117, 2^119], where e4m3 · scale stays a normal f32 (and is
// therefore a bf16). Any other slot is decoded to f32 as before.
#pragma once

#include <cstdint>

#include "checkpoint/binding.h"
#include "checkpoint/weights.h"

namespace dsv4::checkpoint {

// Whether a load with keep_fp8 keeps `slot` in FP8: a dense linear stored as one FP8 tensor of
// the slot's shape whose scales all qualify (read from the mapped file: a few KB a slot).
bool keeps_fp8(const BoundSlot& slot);

// The bytes the kept form takes: the codes and the f32 scales.
int64_t fp8_slot_bytes(const BoundSlot& slot);

// The kept form of a slot keeps_fp8 accepts, in host memory.
Result<LinearWeight> copy_fp8_slot(const BoundSlot& slot);

}  // namespace dsv4::checkpoint

// The official release's FP4 experts (MXFP4: E2M1 elements, one E8M0 scale 2^(s-127) per 32
// along K) held as NVFP4 without changing a value, so they stay packed and run on the engine's
// NVFP4 paths instead of being widened to f32 (8x the bytes: V4-Flash's routed experts alone
// would take 1.1 TB).
//
// The elements are the same nibbles in the same order. Each power-of-two block scale becomes two
// UE4M3 block scales 2^(s - r) under one global decode scale 2^(r - 127) per matrix, where
// r = (the matrix's largest s) - 8: UE4M3 holds exactly the powers of two 2^-9 ... 2^8 (the
// lowest three as subnormals), so a matrix fits when every block holding a non-zero element has
// s >= largest - 17. A block of zeros decodes to zeros under any scale and gets scale 0.
#pragma once

#include <string>
#include <vector>

#include "checkpoint/binding.h"
#include "format/nvfp4.h"

namespace dsv4::checkpoint {

struct Mxfp4AsNvfp4 {
  std::vector<int> largest_scale;  // per matrix of the slot: its largest E8M0 byte
  std::string unfit;               // why the slot cannot be held exactly; empty when it can
};

// Plans a stacked slot whose pieces are all MXFP4 (reads only the scales, and the elements of
// blocks whose scale is out of NVFP4's reach).
Mxfp4AsNvfp4 plan_mxfp4_as_nvfp4(const BoundSlot& slot);

// Writes an MXFP4 piece into `out` (linear block scales) where piece_origin places it, under a
// plan without `unfit`: packed codes as they are, block scales and global scales re-expressed.
void copy_mxfp4_piece_as_nvfp4(const BoundSlot& slot, const BoundPiece& piece,
                               const Mxfp4AsNvfp4& plan, format::Nvfp4Tensor& out);

}  // namespace dsv4::checkpoint

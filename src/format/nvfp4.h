// NVFP4 as dsv4 holds it (../shared/docs/nvfp4.md; docs/nvfp4.md): E2M1 elements packed two a
// byte (element 2j in the low nibble), one UE4M3 scale per 16 consecutive K elements, and one
// FP32 decode scale per matrix: W[n, k] = e2m1(w[n, k]) · ue4m3(sf[n, k/16]) · weight_scale_2.
// The global scale is never folded into the block scales; GEMMs apply it as the epilogue alpha.
//
// Dimension letters: G matrices in a stack (experts), N output rows, K input columns.
#pragma once

#include "base/buffer.h"

namespace dsv4::format {

inline constexpr int kNvfp4BlockSize = 16;  // K elements per UE4M3 scale

// How the block scales are laid out in memory. kLinear is the file layout ([N, K/16] row-major,
// as ModelOpt writes it); kSwizzled128x4 is the 512-byte-atom layout Blackwell-style kernels
// read (nvfp4.md §0.5). The two are joined by one conversion function in format/nvfp4.cpp.
enum class ScaleLayout { kLinear, kSwizzled128x4 };

// A stack of G NVFP4 matrices [G, N, K]; G = 1 for a plain linear layer.
struct Nvfp4Tensor {
  Tensor packed;          // u8 [G, N, K/2]   two E2M1 codes a byte, low nibble first
  Tensor block_scale;     // u8 [G, N, K/16]  UE4M3 bits (kLinear), or the swizzled bytes
  Tensor global_scale;    // f32 [G]          decode scale (ModelOpt weight_scale_2)
  Tensor input_scale;     // f32 [G]          calibrated activation decode scale; empty = dynamic
  ScaleLayout scale_layout = ScaleLayout::kLinear;

  int64_t n_matrices() const { return packed.shape()[0]; }
  int64_t n_rows() const { return packed.shape()[1]; }
  int64_t n_cols() const { return packed.shape()[2] * 2; }
};

}  // namespace dsv4::format

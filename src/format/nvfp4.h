// NVFP4 as dsv4 holds it (../shared/docs/nvfp4.md; docs/nvfp4.md): E2M1 elements packed two a
// byte (element 2j in the low nibble), one UE4M3 scale per 16 consecutive K elements, and one
// FP32 decode scale per matrix: W[n, k] = e2m1(w[n, k]) · ue4m3(sf[n, k/16]) · weight_scale_2.
// The global scale is never folded into the block scales; GEMMs apply it as the epilogue alpha.
//
// This header defines the format's meaning once. The per-block arithmetic below is inline and
// host+device, so the CPU reference (format/nvfp4.cpp, kernels/cpu) and the CUDA kernels
// quantize with the very same fp32 operations and produce identical bits.
//
// Dimension letters: G matrices in a stack (experts), N output rows, K input columns,
// Kb = K/16 block-scale columns.
#pragma once

#include <cfloat>
#include <cstdint>
#include <vector>

#include "base/buffer.h"
#include "base/float_convert.h"

namespace dsv4::format {

inline constexpr int kNvfp4BlockSize = 16;  // K elements per UE4M3 scale
inline constexpr float kE2m1Max = 6.0f;     // largest E2M1 magnitude
inline constexpr float kUe4m3Max = 448.0f;  // largest UE4M3 magnitude
// The global scale maps a tensor's amax here: its largest block gets scale 448 and its largest
// element code ±6.
inline constexpr float kNvfp4Range = kE2m1Max * kUe4m3Max;  // 2688

// One block's 16 E2M1 codes as they sit in a packed row: byte j holds element 2j in its low
// nibble and element 2j+1 in its high nibble (ModelOpt, PTX cvt.e2m1x2; nvfp4.md §1.2). The
// block's scale lives apart, in the block-scale tensor, so a row of K elements is exactly K/16
// of these back to back.
struct Nvfp4Block {
  uint8_t codes[kNvfp4BlockSize / 2];
};
static_assert(sizeof(Nvfp4Block) == kNvfp4BlockSize / 2, "a block is 16 nibbles, no padding");

// How the block scales are laid out in memory. kLinear is the file layout ([N, K/16] row-major,
// as ModelOpt writes it); kSwizzled128x4 is the 512-byte-atom layout Blackwell-style kernels
// read (nvfp4.md §2.1). The two are joined by to_swizzled / to_linear below.
enum class ScaleLayout { kLinear, kSwizzled128x4 };

// ---- Scale geometry (host + device) ----
// The swizzled layout pads rows to 128 and scale columns to 4 (K to 64) with zero bytes.
DSV4_HOST_DEVICE inline int64_t padded_scale_rows(ScaleLayout layout, int64_t n_rows) {
  return layout == ScaleLayout::kLinear ? n_rows : (n_rows + 127) / 128 * 128;
}
DSV4_HOST_DEVICE inline int64_t padded_scale_cols(ScaleLayout layout, int64_t n_kb) {
  return layout == ScaleLayout::kLinear ? n_kb : (n_kb + 3) / 4 * 4;
}

// Byte offset of the scale of (row, kb) inside one matrix's scale buffer; n_kb = K/16.
// Swizzled: 512-byte atoms of 128 rows × 4 scale columns, atoms K-major within a 128-row tile;
// inside an atom rows r, r+32, r+64, r+96 and their 4 scales form 16 consecutive bytes
// (CUTLASS Sm1xxBlockScaledConfig, cuBLASLt VEC16_UE4M3).
DSV4_HOST_DEVICE inline int64_t scale_offset(ScaleLayout layout, int64_t row, int64_t kb,
                                             int64_t n_kb) {
  if (layout == ScaleLayout::kLinear) return row * n_kb + kb;
  const int64_t n_k_tiles = (n_kb + 3) / 4;
  return ((row / 128) * n_k_tiles + kb / 4) * 512 + (row % 32) * 16 + ((row / 32) % 4) * 4 + kb % 4;
}

// ---- The two global-scale conventions (nvfp4.md §1.4) ----
// Kernels multiply by the *encode* scale gs = 2688 / amax before rounding; checkpoints store
// the *decode* scale amax / 2688 (ModelOpt weight_scale_2, input_scale) that multiplies the
// decoded values back. dsv4 treats the decode scale as primary, since that is what files hold
// and what the GEMM alpha is made of, and derives encode = 1 / decode with one fp32 division.
// The GEMM epilogue then applies alpha = decode_a · decode_b (W4A4) or decode_b (W4A16).
struct GlobalScale {
  float encode = 1.0f;  // gs: multiplies x before block-scale rounding
  float decode = 1.0f;  // 1/gs: multiplies the decoded values (weight_scale_2, input_scale)

  // decode = amax / 2688, encode = 1 / decode. An all-zero tensor (amax == 0, or so small that
  // amax / 2688 underflows to 0) gets 1 / 1 so every block scale comes out 0 instead of
  // 0·inf = NaN; a decode so small that its reciprocal overflows clamps encode to FLT_MAX
  // (TE-style).
  DSV4_HOST_DEVICE static GlobalScale from_amax(float amax) {
    if (!(amax > 0.0f)) return GlobalScale{};
    return from_decode(amax / kNvfp4Range);
  }
  DSV4_HOST_DEVICE static GlobalScale from_decode(float decode) {
    if (!(decode > 0.0f)) return GlobalScale{};
    const float encode = 1.0f / decode;
    return GlobalScale{encode < FLT_MAX ? encode : FLT_MAX, decode};
  }
};

// ---- Quantizing one block (host + device; the definition of the encode arithmetic) ----
// Every operation is one correctly rounded fp32 op (on CUDA: __fmul_rn / __fdiv_rn, no fast
// math), in this order:
//   amax_b = max_i |x_i|                     exact (a max never rounds)
//   sf     = ue4m3_rn_sat((amax_b · gs) / 6)  scale of the block, saturating at 448
//   mult   = gs / fp32(sf)                    from the ROUNDED scale; 0 when sf == 0
//   q_i    = e2m1_rn_sat(x_i · mult)          ties to even, saturating at ±6
// so that decode(q_i) · sf / gs ≈ x_i. A NaN element is skipped by the max (fmaxf) and encodes
// as code 0; non-finite inputs are outside the contract (nvfp4.md §1.5).
DSV4_HOST_DEVICE inline float nvfp4_block_amax(const float* x) {
  float amax = 0.0f;
  for (int i = 0; i < kNvfp4BlockSize; ++i) amax = fmaxf(amax, fabsf(x[i]));
  return amax;
}

DSV4_HOST_DEVICE inline uint8_t nvfp4_block_scale(float amax_block, float encode) {
  return float_to_e4m3((amax_block * encode) / kE2m1Max);
}

DSV4_HOST_DEVICE inline float nvfp4_element_multiplier(uint8_t scale, float encode) {
  return scale == 0 ? 0.0f : encode / e4m3_to_float(scale);
}

// Quantizes x[0..16) into *out and returns the block's UE4M3 scale byte.
DSV4_HOST_DEVICE inline uint8_t quantize_nvfp4_block(const float* x, float encode,
                                                     Nvfp4Block* out) {
  const uint8_t scale = nvfp4_block_scale(nvfp4_block_amax(x), encode);
  const float mult = nvfp4_element_multiplier(scale, encode);
  for (int j = 0; j < kNvfp4BlockSize / 2; ++j) {
    const uint8_t lo = float_to_e2m1(x[2 * j] * mult);
    const uint8_t hi = float_to_e2m1(x[2 * j + 1] * mult);
    out->codes[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
  return scale;
}

// Element i of a block without the global scale: e2m1 · ue4m3. Exact in fp32 (and in bf16: at
// most 2 + 4 significand bits, range 2^-10 … 2688; nvfp4.md §0.7).
DSV4_HOST_DEVICE inline float nvfp4_block_value(const Nvfp4Block& block, uint8_t scale, int i) {
  const uint8_t byte = block.codes[i / 2];
  const uint8_t code = (i % 2 == 0) ? (byte & 0x0f) : (byte >> 4);
  return e2m1_to_float(code) * e4m3_to_float(scale);
}

// The W4A4 GEMM epilogue scale: one fp32 product in this order (ModelOpt / vLLM form it as
// input_scale · weight_scale_2, per expert for MoE). W4A16 uses the weight's decode scale alone.
DSV4_HOST_DEVICE inline float nvfp4_alpha(float a_decode, float b_decode) {
  return a_decode * b_decode;
}

// ---- Tensors ----

// A non-owning view of a stack of G NVFP4 matrices [G, N, K]; what ops take.
struct Nvfp4View {
  TensorView packed;        // u8 [G, N, K/2]
  TensorView block_scale;   // u8 [G, N, K/16] (kLinear) or [G, pad128(N), pad4(K/16)] (swizzled)
  TensorView global_scale;  // f32 [G] decode scale per matrix (weight_scale_2)
  ScaleLayout scale_layout = ScaleLayout::kLinear;

  int64_t n_matrices() const { return packed.shape[0]; }
  int64_t n_rows() const { return packed.shape[1]; }
  int64_t n_cols() const { return packed.shape[2] * 2; }
  // Matrix g alone as a [1, N, K] view sharing memory.
  Nvfp4View matrix(int64_t g) const {
    return Nvfp4View{packed.rows(g, g + 1), block_scale.rows(g, g + 1), global_scale.rows(g, g + 1),
                     scale_layout};
  }
};

// An activation in NVFP4: what kernels::stage_activation writes and the W4A4 GEMMs read; a
// single matrix [T, K] with one global scale. The caller owns the memory (all on one device).
struct StagedActivation {
  TensorView packed;        // u8 [T, K/2]   E2M1 codes, low nibble first
  TensorView block_scale;   // u8 [T, K/16]  UE4M3 (kLinear), or [pad128(T), pad4(K/16)] swizzled
  TensorView global_scale;  // f32 [1]       decode scale (1/gs): input_scale, or amax/2688
  ScaleLayout scale_layout = ScaleLayout::kLinear;
};

// A stack of G NVFP4 matrices [G, N, K]; G = 1 for a plain linear layer.
struct Nvfp4Tensor {
  Tensor packed;        // u8 [G, N, K/2]   two E2M1 codes a byte, low nibble first
  Tensor block_scale;   // u8 [G, N, K/16]  UE4M3 bits (kLinear), or the swizzled bytes
  Tensor global_scale;  // f32 [G]          decode scale (ModelOpt weight_scale_2)
  Tensor input_scale;   // f32 [G]          calibrated activation decode scale; empty = dynamic
  ScaleLayout scale_layout = ScaleLayout::kLinear;

  int64_t n_matrices() const { return packed.shape()[0]; }
  int64_t n_rows() const { return packed.shape()[1]; }
  int64_t n_cols() const { return packed.shape()[2] * 2; }
  Nvfp4View view() const {
    return Nvfp4View{packed.view(), block_scale.view(), global_scale.view(), scale_layout};
  }
};

// Checks that a view's tensors agree with each other (dtypes, shapes incl. the padded swizzled
// scale shape, K a multiple of 16); `what` names it in the message.
Status validate_nvfp4(const Nvfp4View& view, const char* what);

// ---- References (host; format/nvfp4.cpp) ----

// max |x| over n values (the dynamic global scale's amax).
float amax_abs(const float* x, int64_t n);

// Quantizes x f32 [G, N, K] (contiguous) into a host Nvfp4Tensor with linear scales, matrix g
// with scales[g] (its decode scale becomes global_scale[g]). K must be a multiple of 16.
Result<Nvfp4Tensor> quantize_ref(const float* x, int64_t n_matrices, int64_t n_rows, int64_t n_cols,
                                 const std::vector<GlobalScale>& scales);
// One matrix [N, K].
Result<Nvfp4Tensor> quantize_ref(const float* x, int64_t n_rows, int64_t n_cols, GlobalScale scale);

// The exact values e2m1 · ue4m3 · decode as f32 [G, N, K] (either scale layout, host memory).
Result<Tensor> dequantize_ref(const Nvfp4View& view);

// Scale layout conversions on host u8 tensors; exact inverses on the logical [G, N, Kb] part.
// to_swizzled: [G, N, Kb] -> [G, pad128(N), pad4(Kb)], padding bytes zero.
Result<Tensor> to_swizzled(const TensorView& linear_scales);
// to_linear: [G, pad128(N), pad4(Kb)] -> [G, N, Kb]; n_rows and n_kb are the logical sizes.
Result<Tensor> to_linear(const TensorView& swizzled_scales, int64_t n_rows, int64_t n_kb);
// Rewrites a tensor's block scales into `layout` (no-op when already there).
Status set_scale_layout(Nvfp4Tensor& tensor, ScaleLayout layout);

}  // namespace dsv4::format

#include "checkpoint/fp8_weights.h"

#include <cstring>

#include "base/float_convert.h"

namespace dsv4::checkpoint {
namespace {

// The f32 scale of block i of an e8m0 or f32 scale tensor.
float block_scale(const format::TensorInfo& scales, int64_t i) {
  if (scales.dtype == DType::kF8E8M0) return e8m0_to_float(scales.data[i]);
  float v;
  std::memcpy(&v, scales.data + 4 * i, sizeof v);
  return v;
}

// A power of two in [2^-117, 2^119]: e4m3's smallest non-zero magnitude, 2^-9, times it is at
// least 2^-126 (f32's and bf16's smallest normal) and its largest, 448 = 1.75 · 2^8, below 2^128.
bool qualifies(float scale) {
  const uint32_t bits = float_bits(scale);
  const int biased_exponent = static_cast<int>(bits >> 23);  // the sign bit must be 0
  return (bits & 0x7fffffu) == 0 && biased_exponent >= 127 - 117 && biased_exponent <= 127 + 119;
}

}  // namespace

bool keeps_fp8(const BoundSlot& slot) {
  if (slot_spec(slot.param).storage != Storage::kLinear || slot.pieces.size() != 1 ||
      slot.shape.rank != 2) {
    return false;
  }
  const BoundPiece& piece = slot.pieces.front();
  if (piece.form != StorageForm::kFp8Block || piece.shape != slot.shape || piece.offset != 0) {
    return false;
  }
  const format::TensorInfo& scales = *piece.stored.block_scale;
  const int64_t n_scales = scales.shape.numel();
  for (int64_t i = 0; i < n_scales; ++i) {
    if (!qualifies(block_scale(scales, i))) return false;
  }
  return true;
}

int64_t fp8_slot_bytes(const BoundSlot& slot) {
  const int64_t n = slot.shape[0], k = slot.shape[1];
  const int64_t blocks = (n + format::kFp8WeightBlock - 1) / format::kFp8WeightBlock *
                         ((k + format::kFp8WeightBlock - 1) / format::kFp8WeightBlock);
  return n * k + 4 * blocks;
}

Result<LinearWeight> copy_fp8_slot(const BoundSlot& slot) {
  const BoundPiece& piece = slot.pieces.front();
  DSV4_ASSIGN_OR_RETURN(Tensor codes, Tensor::empty(DType::kF8E4M3, slot.shape));
  std::memcpy(codes.data_as<uint8_t>(), piece.stored.weight->data,
              static_cast<size_t>(slot.shape.numel()));
  LinearWeight weight(std::move(codes));
  const format::TensorInfo& scales = *piece.stored.block_scale;
  const format::Fp8BlockView view = weight.fp8_view();
  DSV4_ASSIGN_OR_RETURN(weight.block_scales,
                        Tensor::empty(DType::kF32, {view.scale_rows(), view.scale_cols()}));
  float* out = weight.block_scales.data_as<float>();
  for (int64_t i = 0; i < weight.block_scales.numel(); ++i) out[i] = block_scale(scales, i);
  return weight;
}

}  // namespace dsv4::checkpoint

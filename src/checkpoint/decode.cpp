// Decoders for every storage form validate_piece accepts (formats: ../shared/docs/deepseek_v4.md
// §3.1.5, §3.1.6, §3.3). Shapes: a piece is [B, N, K] with B = numel / (N·K) stacked matrices
// (B = 1 for a plain linear); packed FP4 holds K/2 bytes a row, element 2j in the low nibble.
#include "checkpoint/decode.h"

#include <algorithm>
#include <cstring>

#include "base/check.h"
#include "base/float_convert.h"

namespace dsv4::checkpoint {
namespace {

uint16_t load_u16(const uint8_t* p, int64_t i) {
  uint16_t v;
  std::memcpy(&v, p + 2 * i, sizeof v);
  return v;
}

float load_f32(const uint8_t* p, int64_t i) {
  float v;
  std::memcpy(&v, p + 4 * i, sizeof v);
  return v;
}

float dense_value(DType dtype, const uint8_t* p, int64_t i) {
  switch (dtype) {
    case DType::kF32:
      return load_f32(p, i);
    case DType::kBF16:
      return bf16_to_float(load_u16(p, i));
    case DType::kF16:
      return fp16_to_float(load_u16(p, i));
    default:
      DSV4_UNREACHABLE("not a dense float dtype");
  }
}

// Element k of a packed FP4 row.
float e2m1_at(const uint8_t* row, int64_t k) {
  const uint8_t byte = row[k / 2];
  return e2m1_to_float(k % 2 == 0 ? (byte & 0x0f) : (byte >> 4));
}

// FP8: W[b, r, c] = e4m3(w[b, r, c]) · scale[b, r/128, c/128] (scale e8m0 or f32).
void decode_fp8_block(const BoundPiece& piece, float* out) {
  const auto [n_matrices, n, k] = piece_matrices(piece);
  const format::TensorInfo& sc = *piece.stored.block_scale;
  const int64_t sn = (n + 127) / 128, sk = (k + 127) / 128;
  const uint8_t* w = piece.stored.weight->data;
  for (int64_t b = 0; b < n_matrices; ++b) {
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < k; ++c) {
        const int64_t si = (b * sn + r / 128) * sk + c / 128;
        const float scale =
            sc.dtype == DType::kF32 ? load_f32(sc.data, si) : e8m0_to_float(sc.data[si]);
        const int64_t i = (b * n + r) * k + c;
        out[i] = e4m3_to_float(w[i]) * scale;
      }
    }
  }
}

// MXFP4 (official experts): W[b, r, c] = e2m1(w[b, r, c]) · 2^(s[b, r, c/32] - 127), exact.
void decode_mxfp4(const BoundPiece& piece, float* out) {
  const auto [n_matrices, n, k] = piece_matrices(piece);
  const uint8_t* w = piece.stored.weight->data;
  const uint8_t* sc = piece.stored.block_scale->data;
  for (int64_t row = 0; row < n_matrices * n; ++row) {
    for (int64_t c = 0; c < k; ++c) {
      out[row * k + c] = e2m1_at(w + row * (k / 2), c) * e8m0_to_float(sc[row * (k / 32) + c / 32]);
    }
  }
}

// NVFP4 (ModelOpt): W[b, r, c] = e2m1 · e4m3(s[b, r, c/16]) · global[b]. The block value comes
// from format/nvfp4.h, where the format is defined once; it is exact in f32, so multiplying by
// the global scale rounds once.
void decode_nvfp4(const BoundPiece& piece, float* out) {
  const auto [n_matrices, n, k] = piece_matrices(piece);
  const auto* blocks = reinterpret_cast<const format::Nvfp4Block*>(piece.stored.weight->data);
  const uint8_t* sc = piece.stored.block_scale->data;
  const format::TensorInfo& global_scale = *piece.stored.global_scale;
  const int64_t n_blocks = k / format::kNvfp4BlockSize;
  for (int64_t b = 0; b < n_matrices; ++b) {
    const float global = load_f32(global_scale.data, global_scale.shape.numel() == 1 ? 0 : b);
    for (int64_t row = b * n; row < (b + 1) * n; ++row) {
      for (int64_t c = 0; c < k; ++c) {
        const int64_t block = row * n_blocks + c / format::kNvfp4BlockSize;
        out[row * k + c] =
            format::nvfp4_block_value(blocks[block], sc[block], c % format::kNvfp4BlockSize) *
            global;
      }
    }
  }
}

int64_t integer_value(DType dtype, const uint8_t* p, int64_t i) {
  switch (dtype) {
    case DType::kI8:
      return static_cast<int8_t>(p[i]);
    case DType::kU8:
      return p[i];
    case DType::kI32: {
      int32_t v;
      std::memcpy(&v, p + 4 * i, sizeof v);
      return v;
    }
    case DType::kI64: {
      int64_t v;
      std::memcpy(&v, p + 8 * i, sizeof v);
      return v;
    }
    default:
      DSV4_UNREACHABLE("not an integer dtype");
  }
}

}  // namespace

void decode_to_f32(const BoundPiece& piece, float* out) {
  const format::TensorInfo& w = *piece.stored.weight;
  switch (piece.form) {
    case StorageForm::kDense:
      for (int64_t i = 0; i < piece.shape.numel(); ++i) out[i] = dense_value(w.dtype, w.data, i);
      return;
    case StorageForm::kFp8Block:
      decode_fp8_block(piece, out);
      return;
    case StorageForm::kMxfp4:
      decode_mxfp4(piece, out);
      return;
    case StorageForm::kNvfp4:
      decode_nvfp4(piece, out);
      return;
    case StorageForm::kInteger:
      break;
  }
  DSV4_UNREACHABLE("%s is not a float form", piece.name.c_str());
}

void decode_to_i64(const BoundPiece& piece, int64_t* out) {
  DSV4_CHECK(piece.form == StorageForm::kInteger, "%s is not an integer table", piece.name.c_str());
  const format::TensorInfo& w = *piece.stored.weight;
  for (int64_t i = 0; i < piece.shape.numel(); ++i) out[i] = integer_value(w.dtype, w.data, i);
}

void copy_nvfp4_piece(const BoundPiece& piece, int64_t first_matrix, int64_t row,
                      format::Nvfp4Tensor& out) {
  DSV4_CHECK(piece.form == StorageForm::kNvfp4, "%s is not nvfp4", piece.name.c_str());
  const auto [n_matrices, n, k] = piece_matrices(piece);
  const int64_t out_rows = out.n_rows();
  for (int64_t b = 0; b < n_matrices; ++b) {
    const int64_t g = first_matrix + b;
    DSV4_CHECK(g < out.n_matrices() && row + n <= out_rows, "nvfp4 piece outside its stack");
    std::memcpy(out.packed.data_as<uint8_t>() + (g * out_rows + row) * (k / 2),
                piece.stored.weight->data + b * n * (k / 2), static_cast<size_t>(n * (k / 2)));
    std::memcpy(out.block_scale.data_as<uint8_t>() + (g * out_rows + row) * (k / 16),
                piece.stored.block_scale->data + b * n * (k / 16),
                static_cast<size_t>(n * (k / 16)));
    const format::TensorInfo& global = *piece.stored.global_scale;
    out.global_scale.data_as<float>()[g] = load_f32(global.data, global.shape.numel() == 1 ? 0 : b);
    // w1 and w3 feed one GEMM whose activation quantizer must cover both calibrations: the
    // larger input scale (as vLLM's fused loader takes max over shards).
    if (!out.input_scale.empty_tensor() && piece.stored.input_scale) {
      const format::TensorInfo& in = *piece.stored.input_scale;
      float& dst = out.input_scale.data_as<float>()[g];
      dst = std::max(dst, load_f32(in.data, in.shape.numel() == 1 ? 0 : b));
    }
  }
}

}  // namespace dsv4::checkpoint

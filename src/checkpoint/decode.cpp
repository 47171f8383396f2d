// Decoders for every storage form validate_piece accepts (formats: ../shared/docs/deepseek_v4.md
// §3.1.5, §3.1.6, §3.3). Shapes: a piece is [B, N, K] with B = numel / (N·K) stacked matrices
// (B = 1 for a plain linear); packed FP4 holds K/2 bytes a row, element 2j in the low nibble.
#include "checkpoint/decode.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/check.h"
#include "base/float_convert.h"
#include "base/parallel_for.h"

namespace dsv4::checkpoint {
namespace {

// Pieces are decoded in chunks of whole rows of about this many elements (64 KB of f32: a chunk
// decoded and scanned stays in the core's cache), the chunks spread over threads.
constexpr int64_t kChunkElements = int64_t{1} << 14;

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

// The 8-bit codes' values, from the codecs themselves (base/float_convert.h): a lookup instead of
// an ldexp a value, which made a checkpoint's decode ~20 ns a value (V4-Flash's 280 G expert
// values alone: over an hour).
template <float (*kDecode)(uint8_t)>
const std::array<float, 256>& code_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[static_cast<size_t>(c)] = kDecode(static_cast<uint8_t>(c));
    return t;
  }();
  return table;
}

// Rows [first, end) of a piece seen as rows of its last dimension, k values each, into out.
using RowDecoder = void (*)(const BoundPiece& piece, int64_t first, int64_t end, float* out);

// A dense piece's values [first·k, end·k) by `value` (a loop per dtype, so the loop has no
// switch in it).
template <float (*kValue)(const uint8_t* p, int64_t i)>
void decode_dense_rows(const BoundPiece& piece, int64_t first, int64_t end, float* out) {
  const uint8_t* p = piece.stored.weight->data;
  const int64_t k = piece.shape[piece.shape.rank - 1];
  for (int64_t i = first * k; i < end * k; ++i) *out++ = kValue(p, i);
}

float bf16_at(const uint8_t* p, int64_t i) { return bf16_to_float(load_u16(p, i)); }
// fp16 by a table of every half's value (256 KB), for the same reason as the 8-bit codes.
float f16_at(const uint8_t* p, int64_t i) {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (size_t h = 0; h < t.size(); ++h) t[h] = fp16_to_float(static_cast<uint16_t>(h));
    return t;
  }();
  return table[load_u16(p, i)];
}

RowDecoder dense_decoder(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return decode_dense_rows<load_f32>;
    case DType::kBF16:
      return decode_dense_rows<bf16_at>;
    case DType::kF16:
      return decode_dense_rows<f16_at>;
    default:
      DSV4_UNREACHABLE("not a dense float dtype");
  }
}

// FP8: W[b, r, c] = e4m3(w[b, r, c]) · scale[b, r/128, c/128] (scale e8m0 or f32).
void decode_fp8_block_rows(const BoundPiece& piece, int64_t first, int64_t end, float* out) {
  const auto [n_matrices, n, k] = piece_matrices(piece);
  const format::TensorInfo& sc = *piece.stored.block_scale;
  const int64_t sn = (n + 127) / 128, sk = (k + 127) / 128;
  const std::array<float, 256>& e4m3 = code_table<e4m3_to_float>();
  const std::array<float, 256>& e8m0 = code_table<e8m0_to_float>();
  for (int64_t row = first; row < end; ++row) {
    const uint8_t* codes = piece.stored.weight->data + row * k;
    const int64_t scale_row = (row / n * sn + row % n / 128) * sk;
    for (int64_t c0 = 0; c0 < k; c0 += 128) {
      const int64_t si = scale_row + c0 / 128;
      const float scale = sc.dtype == DType::kF32 ? load_f32(sc.data, si) : e8m0[sc.data[si]];
      for (int64_t c = c0; c < std::min(k, c0 + 128); ++c) *out++ = e4m3[codes[c]] * scale;
    }
  }
}

// A byte of packed FP4 as its two E2M1 values, the low nibble first.
const std::array<std::array<float, 2>, 256>& fp4_byte_table() {
  static const std::array<std::array<float, 2>, 256> table = [] {
    std::array<std::array<float, 2>, 256> t{};
    for (int b = 0; b < 256; ++b) {
      t[static_cast<size_t>(b)] = {e2m1_to_float(static_cast<uint8_t>(b & 0x0f)),
                                   e2m1_to_float(static_cast<uint8_t>(b >> 4))};
    }
    return t;
  }();
  return table;
}

// One block of packed FP4 times its scale.
void decode_fp4_block(const uint8_t* bytes, int64_t n_bytes, float scale, float*& out) {
  const std::array<std::array<float, 2>, 256>& pairs = fp4_byte_table();
  for (int64_t j = 0; j < n_bytes; ++j) {
    const std::array<float, 2>& pair = pairs[bytes[j]];
    *out++ = pair[0] * scale;
    *out++ = pair[1] * scale;
  }
}

// MXFP4 (official experts): W[b, r, c] = e2m1(w[b, r, c]) · 2^(s[b, r, c/32] - 127), exact.
void decode_mxfp4_rows(const BoundPiece& piece, int64_t first, int64_t end, float* out) {
  const int64_t k = piece_matrices(piece).k;
  const std::array<float, 256>& e8m0 = code_table<e8m0_to_float>();
  for (int64_t row = first; row < end; ++row) {
    const uint8_t* codes = piece.stored.weight->data + row * (k / 2);
    const uint8_t* scales = piece.stored.block_scale->data + row * (k / 32);
    for (int64_t b = 0; b < k / 32; ++b) decode_fp4_block(codes + 16 * b, 16, e8m0[scales[b]], out);
  }
}

// NVFP4 (ModelOpt): W[b, r, c] = e2m1 · e4m3(s[b, r, c/16]) · global[b]. The block value
// e2m1 · e4m3 is format/nvfp4.h's nvfp4_block_value (a test holds them equal for every code and
// scale); it is exact in f32, so multiplying by the global scale rounds once.
void decode_nvfp4_rows(const BoundPiece& piece, int64_t first, int64_t end, float* out) {
  const auto [n_matrices, n, k] = piece_matrices(piece);
  const format::TensorInfo& global_scale = *piece.stored.global_scale;
  const std::array<float, 256>& e4m3 = code_table<e4m3_to_float>();
  constexpr int64_t kBlock = format::kNvfp4BlockSize;
  for (int64_t row = first; row < end; ++row) {
    const float global = load_f32(global_scale.data, global_scale.shape.numel() == 1 ? 0 : row / n);
    const uint8_t* codes = piece.stored.weight->data + row * (k / 2);
    const uint8_t* scales = piece.stored.block_scale->data + row * (k / kBlock);
    for (int64_t b = 0; b < k / kBlock; ++b) {
      float* block = out;
      decode_fp4_block(codes + kBlock / 2 * b, kBlock / 2, e4m3[scales[b]], out);
      for (float* v = block; v < out; ++v) *v *= global;
    }
  }
}

RowDecoder row_decoder(const BoundPiece& piece) {
  switch (piece.form) {
    case StorageForm::kDense:
      return dense_decoder(piece.stored.weight->dtype);
    case StorageForm::kFp8Block:
      return decode_fp8_block_rows;
    case StorageForm::kMxfp4:
      return decode_mxfp4_rows;
    case StorageForm::kNvfp4:
      return decode_nvfp4_rows;
    case StorageForm::kInteger:
      break;
  }
  DSV4_UNREACHABLE("%s is not a float form", piece.name.c_str());
}

// Branch-free, so the compiler vectorizes it: |NaN| ≤ max is false, as is |inf| ≤ max.
PieceScan scan(const float* v, int64_t n) {
  int64_t n_non_finite = 0;
  bool any_nonzero = false;
  for (int64_t i = 0; i < n; ++i) {
    n_non_finite += !(std::fabs(v[i]) <= std::numeric_limits<float>::max());
    any_nonzero |= v[i] != 0.0f;
  }
  return {n_non_finite, !any_nonzero};
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

std::vector<PieceScan> decode_to_f32(std::span<const BoundPiece* const> pieces,
                                     std::span<float* const> outs) {
  DSV4_CHECK(pieces.size() == outs.size(), "decode_to_f32: %zu pieces, %zu outputs", pieces.size(),
             outs.size());
  // Every piece in chunks of whole rows (of its last dimension), all chunks on the threads.
  struct Chunk {
    size_t piece;
    int64_t first, end;  // rows
    int64_t k;           // values a row
  };
  std::vector<Chunk> chunks;
  for (size_t p = 0; p < pieces.size(); ++p) {
    const int64_t k = pieces[p]->shape[pieces[p]->shape.rank - 1];
    const int64_t n_rows = pieces[p]->shape.numel() / k;
    const int64_t chunk_rows = std::max<int64_t>(1, kChunkElements / k);
    for (int64_t first = 0; first < n_rows; first += chunk_rows) {
      chunks.push_back({p, first, std::min(n_rows, first + chunk_rows), k});
    }
  }
  std::vector<PieceScan> chunk_scans(chunks.size());
  parallel_for(static_cast<int64_t>(chunks.size()), [&](int64_t i) {
    const Chunk& c = chunks[static_cast<size_t>(i)];
    const BoundPiece& piece = *pieces[c.piece];
    const int64_t n_values = (c.end - c.first) * c.k;
    thread_local std::vector<float> scratch;
    float* values = outs[c.piece];
    if (values != nullptr) {
      values += c.first * c.k;
    } else {
      scratch.resize(static_cast<size_t>(n_values));
      values = scratch.data();
    }
    row_decoder(piece)(piece, c.first, c.end, values);
    chunk_scans[static_cast<size_t>(i)] = scan(values, n_values);
  });
  std::vector<PieceScan> scans(pieces.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    PieceScan& s = scans[chunks[i].piece];
    s.n_non_finite += chunk_scans[i].n_non_finite;
    s.all_zero = s.all_zero && chunk_scans[i].all_zero;
  }
  return scans;
}

PieceScan decode_to_f32(const BoundPiece& piece, float* out) {
  const BoundPiece* pieces[] = {&piece};
  float* const outs[] = {out};
  return decode_to_f32(pieces, outs).front();
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

// validate_piece: what a bound checkpoint tensor (and its scale siblings) must look like, given
// the logical shape the engine wants. Every storage form is recognised from dtypes and shapes
// (not from sibling names alone: some converters keep `.scale` for an e4m3 NVFP4 scale, §3.3):
//   dense   f32/f16/bf16 [.., N, K]
//   fp8     f8_e4m3 [.., N, K]   + block scale f8_e8m0 or f32 [.., ceil(N/128), ceil(K/128)]
//   mxfp4   i8/u8 [.., N, K/2]   + block scale f8_e8m0 [.., N, K/32]
//   nvfp4   i8/u8 [.., N, K/2]   + block scale f8_e4m3 [.., N, K/16] + global f32 [] | [1] | [..]
//                                 (+ optional input scale shaped like the global one)
#include <cctype>

#include "checkpoint/binding.h"

namespace dsv4::checkpoint {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string describe(DType dtype, const Shape& shape) {
  return lower(dtype_name(dtype)) + " " + shape.to_string();
}

bool is_float(DType d) { return d == DType::kF32 || d == DType::kF16 || d == DType::kBF16; }
bool is_integer(DType d) {
  return d == DType::kI8 || d == DType::kU8 || d == DType::kI32 || d == DType::kI64;
}

std::string piece_label(const SlotSpec& spec, int64_t layer, const BoundPiece& piece) {
  std::string label = slot_label(spec.param, layer);
  if (piece.expert_idx >= 0) {
    label += " expert " + std::to_string(piece.expert_idx);
    if (spec.param == Param::kExpertsW13) label += piece.half == 0 ? " (w1, gate)" : " (w3, up)";
  }
  return label;
}

class PieceChecker {
 public:
  PieceChecker(const SlotSpec& spec, int64_t layer, const BoundPiece& piece)
      : piece_(piece), label_(piece_label(spec, layer, piece)) {}

  Status mismatch(const std::string& expected, const format::TensorInfo& got) const {
    return invalid_argument(label_ + ": expected " + expected + ", got " +
                            describe(got.dtype, got.shape) + " (key " + got.name + " in " +
                            piece_.file + ")");
  }
  Status expect(const format::TensorInfo* t, bool dtype_ok, const Shape& shape,
                const std::string& expected_dtype) const {
    if (!t)
      return invalid_argument(label_ + ": " + expected_dtype + " " + shape.to_string() +
                              " is missing for " + piece_.name + " (in " + piece_.file + ")");
    if (!dtype_ok || t->shape != shape)
      return mismatch(expected_dtype + " " + shape.to_string(), *t);
    return ok_status();
  }
  Status no_sibling(const format::TensorInfo* t, const std::string& form) const {
    if (!t) return ok_status();
    return invalid_argument(label_ + ": " + t->name + " (in " + piece_.file + ") is a scale, but " +
                            piece_.name + " is stored as " + form + ", which takes none");
  }

 private:
  const BoundPiece& piece_;
  std::string label_;
};

// `dims` with the last two replaced by (rows, cols).
Shape with_last_two(const Shape& dims, int64_t rows, int64_t cols) {
  Shape out = dims;
  out[out.rank - 2] = rows;
  out[out.rank - 1] = cols;
  return out;
}

// A global or input scale: one f32 per matrix, written [] or [1] for a single matrix.
bool per_matrix_scale_ok(const format::TensorInfo& t, int64_t n_matrices) {
  return t.dtype == DType::kF32 && (t.shape.numel() == n_matrices) &&
         (t.shape.rank <= 1 || (t.shape.rank == 2 && t.shape[1] == 1));
}

Result<StorageForm> classify_matrix(const PieceChecker& check, const BoundPiece& piece) {
  const StoredTensor& s = piece.stored;
  const format::TensorInfo& w = *s.weight;
  const Shape& want = piece.shape;
  const int64_t n = want[want.rank - 2], k = want[want.rank - 1];
  const int64_t n_matrices = want.numel() / (n * k);
  const std::string dense = "bf16 " + want.to_string();
  if (is_float(w.dtype)) {
    if (w.shape != want) return check.mismatch(dense, w);
    DSV4_RETURN_IF_ERROR(check.no_sibling(s.block_scale, "dense float"));
    DSV4_RETURN_IF_ERROR(check.no_sibling(s.global_scale, "dense float"));
    DSV4_RETURN_IF_ERROR(check.no_sibling(s.input_scale, "dense float"));
    return StorageForm::kDense;
  }
  if (w.dtype == DType::kF8E4M3) {
    if (w.shape != want) return check.mismatch(dense, w);
    const format::TensorInfo* sc = s.block_scale;
    DSV4_RETURN_IF_ERROR(check.expect(
        sc, sc && (sc->dtype == DType::kF8E8M0 || sc->dtype == DType::kF32),
        with_last_two(want, (n + 127) / 128, (k + 127) / 128), "fp8 block scale f8_e8m0 or f32"));
    DSV4_RETURN_IF_ERROR(check.no_sibling(s.global_scale, "fp8 with 128x128 block scales"));
    DSV4_RETURN_IF_ERROR(check.no_sibling(s.input_scale, "fp8 with 128x128 block scales"));
    return StorageForm::kFp8Block;
  }
  if (w.dtype != DType::kI8 && w.dtype != DType::kU8) return check.mismatch(dense, w);
  if (k % 2 != 0 || w.shape != with_last_two(want, n, k / 2)) {
    return check.mismatch(
        "u8/i8 " + with_last_two(want, n, k / 2).to_string() + " (packed fp4 of " + dense + ")", w);
  }
  const format::TensorInfo* sc = s.block_scale;
  if (sc && sc->dtype == DType::kF8E8M0) {
    DSV4_RETURN_IF_ERROR(
        check.expect(sc, k % 32 == 0, with_last_two(want, n, k / 32), "fp4 block scale f8_e8m0"));
    DSV4_RETURN_IF_ERROR(check.no_sibling(s.global_scale, "fp4 with e8m0 scales per 32"));
    DSV4_RETURN_IF_ERROR(check.no_sibling(s.input_scale, "fp4 with e8m0 scales per 32"));
    return StorageForm::kMxfp4;
  }
  DSV4_RETURN_IF_ERROR(check.expect(sc, sc && sc->dtype == DType::kF8E4M3 && k % 16 == 0,
                                    with_last_two(want, n, k / 16),
                                    "nvfp4 block scale f8_e4m3 (or an fp4 f8_e8m0 scale)"));
  const std::string per_matrix = "f32 [] or " + Shape{n_matrices}.to_string();
  if (!s.global_scale) {
    return check.expect(nullptr, false, Shape{n_matrices},
                        "nvfp4 global scale (weight_scale_2) f32");
  }
  if (!per_matrix_scale_ok(*s.global_scale, n_matrices))
    return check.mismatch(per_matrix, *s.global_scale);
  if (s.input_scale && !per_matrix_scale_ok(*s.input_scale, n_matrices)) {
    return check.mismatch(per_matrix, *s.input_scale);
  }
  return StorageForm::kNvfp4;
}

}  // namespace

Result<StorageForm> validate_piece(const SlotSpec& spec, int64_t layer, const BoundPiece& piece) {
  const PieceChecker check(spec, layer, piece);
  const format::TensorInfo& w = *piece.stored.weight;
  switch (spec.storage) {
    case Storage::kFloat:
    case Storage::kIndex: {
      const bool integer = spec.storage == Storage::kIndex;
      if (!(integer ? is_integer(w.dtype) : is_float(w.dtype)) || w.shape != piece.shape) {
        const std::string want = integer ? "an integer dtype (i64 in the release)"
                                         : lower(dtype_name(spec.release_dtype));
        return check.mismatch(want + " " + piece.shape.to_string(), w);
      }
      const std::string form = integer ? "integers" : "dense float";
      DSV4_RETURN_IF_ERROR(check.no_sibling(piece.stored.block_scale, form));
      DSV4_RETURN_IF_ERROR(check.no_sibling(piece.stored.global_scale, form));
      DSV4_RETURN_IF_ERROR(check.no_sibling(piece.stored.input_scale, form));
      return integer ? StorageForm::kInteger : StorageForm::kDense;
    }
    case Storage::kMatrix:
    case Storage::kLinear:
    case Storage::kExperts:
      return classify_matrix(check, piece);
  }
  DSV4_UNREACHABLE("bad storage");
}

}  // namespace dsv4::checkpoint

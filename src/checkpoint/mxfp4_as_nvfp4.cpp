#include "checkpoint/mxfp4_as_nvfp4.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "base/float_convert.h"

namespace dsv4::checkpoint {
namespace {

constexpr int kMxBlock = 32;             // K elements per E8M0 scale
constexpr int kE8m0Nan = 0xff;           // the one E8M0 code that is not a power of two
constexpr int kLargestUe4m3Power = 8;    // 2^8 = 256 <= 448
constexpr int kSmallestUe4m3Power = -9;  // the smallest subnormal
constexpr int kE8m0Bias = 127;

// The UE4M3 byte of 2^(s - largest + 8), or -1 when that power is below UE4M3's reach. By a
// table of the codec's own bytes (one a block of 32 values: an ldexp and a rounding each cost
// about as much as decoding the block).
int ue4m3_power_of_two(int scale, int largest) {
  static const std::array<uint8_t, kLargestUe4m3Power - kSmallestUe4m3Power + 1> bytes = [] {
    std::array<uint8_t, kLargestUe4m3Power - kSmallestUe4m3Power + 1> t{};
    for (int p = kSmallestUe4m3Power; p <= kLargestUe4m3Power; ++p) {
      t[static_cast<size_t>(p - kSmallestUe4m3Power)] = float_to_e4m3(std::ldexp(1.0f, p));
    }
    return t;
  }();
  const int power = scale - largest + kLargestUe4m3Power;
  if (power < kSmallestUe4m3Power) return -1;
  return bytes[static_cast<size_t>(power - kSmallestUe4m3Power)];
}

// Whether 32 packed E2M1 elements (16 bytes) hold a non-zero value (codes 0 and 8 are ±0).
bool block_has_nonzero(const uint8_t* codes) {
  for (int i = 0; i < kMxBlock / 2; ++i) {
    if ((codes[i] & 0x77) != 0) return true;
  }
  return false;
}

// Calls visit(matrix of the slot, row of the piece's matrix b, e8m0 scales of the row, packed
// codes of the row) for every row of every matrix of the piece.
template <typename Visit>
void for_each_row(const BoundSlot& slot, const BoundPiece& piece, Visit&& visit) {
  const auto [n_matrices, n, k] = piece_matrices(piece);
  const int64_t first = piece_origin(slot, piece).matrix;
  for (int64_t b = 0; b < n_matrices; ++b) {
    for (int64_t r = 0; r < n; ++r) {
      const int64_t row = b * n + r;
      visit(first + b, r, piece.stored.block_scale->data + row * (k / kMxBlock),
            piece.stored.weight->data + row * (k / 2));
    }
  }
}

std::string what(const BoundPiece& piece, int64_t matrix, int64_t row, int64_t block) {
  return "expert " + std::to_string(matrix) + " (key " + piece.name + " in " + piece.file +
         ", row " + std::to_string(row) + ", block " + std::to_string(block) + ")";
}

}  // namespace

Mxfp4AsNvfp4 plan_mxfp4_as_nvfp4(const BoundSlot& slot) {
  Mxfp4AsNvfp4 plan;
  plan.largest_scale.assign(static_cast<size_t>(slot.shape[0]), 0);
  for (const BoundPiece& piece : slot.pieces) {
    const int64_t n_blocks = piece_matrices(piece).k / kMxBlock;
    for_each_row(slot, piece, [&](int64_t g, int64_t r, const uint8_t* scales, const uint8_t*) {
      for (int64_t j = 0; j < n_blocks; ++j) {
        if (scales[j] == kE8m0Nan && plan.unfit.empty()) {
          plan.unfit = what(piece, g, r, j) + " has the NaN scale 0xff";
        }
        int& largest = plan.largest_scale[static_cast<size_t>(g)];
        largest = std::max(largest, static_cast<int>(scales[j]));
      }
    });
  }
  if (!plan.unfit.empty()) return plan;
  for (const BoundPiece& piece : slot.pieces) {
    const int64_t n_blocks = piece_matrices(piece).k / kMxBlock;
    for_each_row(
        slot, piece, [&](int64_t g, int64_t r, const uint8_t* scales, const uint8_t* codes) {
          const int largest = plan.largest_scale[static_cast<size_t>(g)];
          for (int64_t j = 0; j < n_blocks && plan.unfit.empty(); ++j) {
            if (ue4m3_power_of_two(scales[j], largest) < 0 &&
                block_has_nonzero(codes + j * (kMxBlock / 2))) {
              plan.unfit =
                  what(piece, g, r, j) + ": its scale 2^" + std::to_string(scales[j] - kE8m0Bias) +
                  " is 2^" + std::to_string(largest - scales[j]) +
                  " below the expert's largest, beyond the 2^17 that NVFP4's block scales span";
            }
          }
        });
  }
  return plan;
}

void copy_mxfp4_piece_as_nvfp4(const BoundSlot& slot, const BoundPiece& piece,
                               const Mxfp4AsNvfp4& plan, format::Nvfp4Tensor& out) {
  DSV4_CHECK(piece.form == StorageForm::kMxfp4 && plan.unfit.empty(),
             "%s is not an MXFP4 piece that fits NVFP4", piece.name.c_str());
  const int64_t k = piece_matrices(piece).k, out_rows = out.n_rows();
  const int64_t first_row = piece_origin(slot, piece).row;
  for_each_row(slot, piece, [&](int64_t g, int64_t r, const uint8_t* scales, const uint8_t* codes) {
    DSV4_CHECK(g < out.n_matrices() && first_row + r < out_rows, "mxfp4 piece outside its stack");
    const int64_t row = g * out_rows + first_row + r;
    std::memcpy(out.packed.data_as<uint8_t>() + row * (k / 2), codes, static_cast<size_t>(k / 2));
    const int largest = plan.largest_scale[static_cast<size_t>(g)];
    uint8_t* nv_scales = out.block_scale.data_as<uint8_t>() + row * (k / format::kNvfp4BlockSize);
    for (int64_t j = 0; j < k / kMxBlock; ++j) {
      // Out of reach only for blocks of zeros (the plan checked): any scale decodes them exactly.
      const int byte = std::max(ue4m3_power_of_two(scales[j], largest), 0);
      nv_scales[2 * j] = nv_scales[2 * j + 1] = static_cast<uint8_t>(byte);
    }
    out.global_scale.data_as<float>()[g] =
        std::ldexp(1.0f, largest - kLargestUe4m3Power - kE8m0Bias);
  });
}

}  // namespace dsv4::checkpoint

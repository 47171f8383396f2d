// checkpoint::decode_to_f32 against the codecs applied element by element (base/float_convert.h,
// format/nvfp4.h's nvfp4_block_value): every storage form, every code (NaN codes and the largest
// scales included), bit for bit, and the scan (non-finite count, all zero) the same whether the
// values are written or only scanned. Pieces span several decode chunks, so the threads' split
// is covered.
#include "checkpoint/decode.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/float_convert.h"
#include "testing/random.h"

namespace dsv4::checkpoint {
namespace {

using testing::SeededRng;

// Bytes that stand for a stored tensor, and its TensorInfo.
struct Stored {
  std::vector<uint8_t> bytes;
  format::TensorInfo info;

  Stored(DType dtype, Shape shape, std::vector<uint8_t> data) : bytes(std::move(data)) {
    info = {"t", dtype, shape, bytes.data(), bytes.size()};
  }
};

std::vector<uint8_t> random_bytes(SeededRng& rng, int64_t n) {
  std::vector<uint8_t> b(static_cast<size_t>(n));
  for (uint8_t& x : b) x = static_cast<uint8_t>(rng.uniform_int(0, 255));
  return b;
}

BoundPiece piece_of(StorageForm form, Shape shape, const Stored& weight,
                    const Stored* block_scale = nullptr, const Stored* global = nullptr) {
  BoundPiece p;
  p.name = "t";
  p.shape = shape;
  p.form = form;
  p.stored.weight = &weight.info;
  p.stored.block_scale = block_scale ? &block_scale->info : nullptr;
  p.stored.global_scale = global ? &global->info : nullptr;
  return p;
}

// Decodes `piece` twice (to memory, and scan only) and holds both to `want`, bit for bit and in
// the scan.
void expect_decodes_to(const BoundPiece& piece, const std::vector<float>& want) {
  std::vector<float> got(want.size());
  const PieceScan written = decode_to_f32(piece, got.data());
  const PieceScan scanned = decode_to_f32(piece, nullptr);
  int64_t mismatches = 0, n_non_finite = 0;
  bool all_zero = true;
  for (size_t i = 0; i < want.size(); ++i) {
    mismatches += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
    n_non_finite += !std::isfinite(want[i]);
    all_zero = all_zero && want[i] == 0.0f;
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_EQ(written.n_non_finite, n_non_finite);
  EXPECT_EQ(scanned.n_non_finite, n_non_finite);
  EXPECT_EQ(written.all_zero, all_zero);
  EXPECT_EQ(scanned.all_zero, all_zero);
}

TEST(DecodeTest, DenseFormsAreTheirCodecs) {
  SeededRng rng;
  const int64_t n = 300, k = 129;  // several chunks, rows of an odd length
  for (const DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const int64_t width = dtype == DType::kF32 ? 4 : 2;
    const Stored w(dtype, {n, k}, random_bytes(rng, n * k * width));
    std::vector<float> want(static_cast<size_t>(n * k));
    for (int64_t i = 0; i < n * k; ++i) {
      uint32_t bits = 0;
      std::memcpy(&bits, w.bytes.data() + i * width, static_cast<size_t>(width));
      want[static_cast<size_t>(i)] = dtype == DType::kF32 ? float_from_bits(bits)
                                     : dtype == DType::kBF16
                                         ? bf16_to_float(static_cast<uint16_t>(bits))
                                         : fp16_to_float(static_cast<uint16_t>(bits));
    }
    expect_decodes_to(piece_of(StorageForm::kDense, {n, k}, w), want);
  }
}

TEST(DecodeTest, Fp8BlocksAreE4m3TimesTheirScale) {
  SeededRng rng;
  const int64_t g = 2, n = 200, k = 300;  // stacked matrices, partial 128-blocks
  const int64_t sn = 2, sk = 3;
  for (const bool f32_scales : {false, true}) {
    SCOPED_TRACE(f32_scales ? "f32 scales" : "e8m0 scales");
    const Stored w(DType::kF8E4M3, {g, n, k}, random_bytes(rng, g * n * k));
    std::vector<uint8_t> scale_bytes = random_bytes(rng, g * sn * sk);
    scale_bytes[0] = 0xff;  // e8m0 NaN
    scale_bytes[1] = 254;   // 2^127: large codes overflow to infinity
    std::vector<float> scales(scale_bytes.size());
    for (size_t i = 0; i < scales.size(); ++i) scales[i] = e8m0_to_float(scale_bytes[i]);
    std::vector<uint8_t> f32_bytes(scales.size() * 4);
    std::memcpy(f32_bytes.data(), scales.data(), f32_bytes.size());
    const Stored s(f32_scales ? DType::kF32 : DType::kF8E8M0, {g, sn, sk},
                   f32_scales ? f32_bytes : scale_bytes);
    std::vector<float> want(static_cast<size_t>(g * n * k));
    for (int64_t b = 0; b < g; ++b) {
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t c = 0; c < k; ++c) {
          const int64_t i = (b * n + r) * k + c;
          want[static_cast<size_t>(i)] =
              e4m3_to_float(w.bytes[static_cast<size_t>(i)]) *
              scales[static_cast<size_t>((b * sn + r / 128) * sk + c / 128)];
        }
      }
    }
    expect_decodes_to(piece_of(StorageForm::kFp8Block, {g, n, k}, w, &s), want);
  }
}

TEST(DecodeTest, Mxfp4IsE2m1TimesItsPowerOfTwo) {
  SeededRng rng;
  const int64_t n = 512, k = 96;
  const Stored w(DType::kU8, {n, k / 2}, random_bytes(rng, n * k / 2));
  std::vector<uint8_t> scale_bytes = random_bytes(rng, n * k / 32);
  scale_bytes[0] = 0xff;
  scale_bytes[1] = 254;
  scale_bytes[2] = 0;
  const Stored s(DType::kU8, {n, k / 32}, scale_bytes);
  std::vector<float> want(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      const uint8_t byte = w.bytes[static_cast<size_t>((r * k + c) / 2)];
      const uint8_t code = c % 2 == 0 ? (byte & 0x0f) : (byte >> 4);
      want[static_cast<size_t>(r * k + c)] =
          e2m1_to_float(code) *
          e8m0_to_float(scale_bytes[static_cast<size_t>(r * (k / 32) + c / 32)]);
    }
  }
  expect_decodes_to(piece_of(StorageForm::kMxfp4, {n, k}, w, &s), want);
}

TEST(DecodeTest, Nvfp4IsItsBlockValueTimesTheGlobalScale) {
  SeededRng rng;
  const int64_t g = 3, n = 160, k = 64;  // every e4m3 scale code (NaN ones too) appears
  const Stored w(DType::kU8, {g, n, k / 2}, random_bytes(rng, g * n * k / 2));
  std::vector<uint8_t> scale_bytes(static_cast<size_t>(g * n * k / 16));
  for (size_t i = 0; i < scale_bytes.size(); ++i) scale_bytes[i] = static_cast<uint8_t>(i % 256);
  const Stored s(DType::kF8E4M3, {g, n, k / 16}, scale_bytes);
  const float globals[g] = {1.5e-3f, 3.0e36f, 0.25f};  // the second overflows large blocks
  std::vector<uint8_t> global_bytes(sizeof globals);
  std::memcpy(global_bytes.data(), globals, sizeof globals);
  const Stored global(DType::kF32, {g}, global_bytes);
  const auto* blocks = reinterpret_cast<const format::Nvfp4Block*>(w.bytes.data());
  std::vector<float> want(static_cast<size_t>(g * n * k));
  for (int64_t row = 0; row < g * n; ++row) {
    for (int64_t c = 0; c < k; ++c) {
      const int64_t block = row * (k / 16) + c / 16;
      want[static_cast<size_t>(row * k + c)] =
          format::nvfp4_block_value(blocks[block], scale_bytes[static_cast<size_t>(block)],
                                    static_cast<int>(c % 16)) *
          globals[row / n];
    }
  }
  expect_decodes_to(piece_of(StorageForm::kNvfp4, {g, n, k}, w, &s, &global), want);
}

TEST(DecodeTest, AllZeroPiecesScanAsZero) {
  const int64_t n = 100, k = 256;
  const Stored w(DType::kBF16, {n, k}, std::vector<uint8_t>(static_cast<size_t>(n * k * 2), 0));
  expect_decodes_to(piece_of(StorageForm::kDense, {n, k}, w),
                    std::vector<float>(static_cast<size_t>(n * k), 0.0f));
}

}  // namespace
}  // namespace dsv4::checkpoint

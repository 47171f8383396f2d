// decode_bench: how fast the loader decodes and scans checkpoint values on the host
// (checkpoint::decode_to_f32), per storage form, on V4-sized pieces of random codes: written to
// memory (a dense weight the engine keeps in f32 / bf16) and scanned only (FP4 experts kept
// packed: their values are decoded for the post-load scan alone). Median of 9 timed calls after
// one warm-up, on parallel_for's threads (one a core). A program, not a
// test; results in docs/bench.md. The last line scales the MXFP4 rate to V4-Flash's routed
// experts (43 layers × 256 experts × 3 matrices of 2048 × 4096), the bulk of a load.
//   usage: decode_bench
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "checkpoint/decode.h"

namespace dsv4::bench {
namespace {

struct Stored {
  std::vector<uint8_t> bytes;
  format::TensorInfo info;
};

// Random bytes, but for scale tensors: codes in [lo, hi], so no scale is NaN or overflows.
Stored stored(DType dtype, Shape shape, int64_t n_bytes, std::mt19937& rng, int lo = 0,
              int hi = 255) {
  Stored s;
  s.bytes.resize(static_cast<size_t>(n_bytes));
  std::uniform_int_distribution<int> byte(lo, hi);
  for (uint8_t& b : s.bytes) b = static_cast<uint8_t>(byte(rng));
  s.info = {"t", dtype, shape, s.bytes.data(), s.bytes.size()};
  return s;
}

double median_ns_per_value(const checkpoint::BoundPiece& piece, float* out) {
  std::vector<double> ns;
  for (int i = 0; i < 10; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const checkpoint::PieceScan scan = checkpoint::decode_to_f32(piece, out);
    const auto end = std::chrono::steady_clock::now();
    if (scan.all_zero) std::printf("(all zero)\n");  // keeps the scan's result alive
    if (i > 0) ns.push_back(std::chrono::duration<double, std::nano>(end - start).count());
  }
  std::sort(ns.begin(), ns.end());
  return ns[ns.size() / 2] / static_cast<double>(piece.shape.numel());
}

void run(const char* name, checkpoint::StorageForm form, Shape shape, const Stored& weight,
         const Stored* block_scale, const Stored* global) {
  checkpoint::BoundPiece piece;
  piece.name = name;
  piece.shape = shape;
  piece.form = form;
  piece.stored.weight = &weight.info;
  piece.stored.block_scale = block_scale ? &block_scale->info : nullptr;
  piece.stored.global_scale = global ? &global->info : nullptr;
  std::vector<float> out(static_cast<size_t>(shape.numel()));
  const double written = median_ns_per_value(piece, out.data());
  const double scanned = median_ns_per_value(piece, nullptr);
  const double bytes_per_value = static_cast<double>(weight.bytes.size()) / shape.numel();
  std::printf("| %s | %s | %.3f | %.3f | %.2f |\n", name, shape.to_string().c_str(), written,
              scanned, bytes_per_value / scanned);
}

}  // namespace
}  // namespace dsv4::bench

int main() {
  using namespace dsv4;
  using namespace dsv4::bench;
  using checkpoint::StorageForm;
  std::mt19937 rng(7);
  const int64_t n = 4096, k = 4096, f = 2048;
  std::printf("decode_bench: %u threads\n\n", std::thread::hardware_concurrency());
  std::printf(
      "| form | piece | ns a value, written | ns a value, scanned only | GB/s stored, scanned |\n");
  std::printf("| --- | --- | ---: | ---: | ---: |\n");
  const Stored bf16 = stored(DType::kBF16, {n, k}, n * k * 2, rng, 0x30, 0x40);
  run("bf16", StorageForm::kDense, {n, k}, bf16, nullptr, nullptr);
  const Stored fp8 = stored(DType::kF8E4M3, {n, k}, n * k, rng);
  const Stored fp8_scale = stored(DType::kF8E8M0, {n / 128, k / 128}, n * k / 16384, rng, 100, 140);
  run("fp8 + e8m0 128×128", StorageForm::kFp8Block, {n, k}, fp8, &fp8_scale, nullptr);
  const Stored fp4 = stored(DType::kU8, {f, k / 2}, f * k / 2, rng);
  const Stored mx_scale = stored(DType::kU8, {f, k / 32}, f * k / 32, rng, 100, 140);
  run("mxfp4 (an expert's w1)", StorageForm::kMxfp4, {f, k}, fp4, &mx_scale, nullptr);
  const Stored nv_scale = stored(DType::kF8E4M3, {f, k / 16}, f * k / 16, rng, 0x20, 0x60);
  const Stored global = stored(DType::kF32, {1}, 4, rng, 0x3c, 0x3c);
  run("nvfp4 (an expert's w1)", StorageForm::kNvfp4, {f, k}, fp4, &nv_scale, &global);

  checkpoint::BoundPiece expert;
  expert.name = "mxfp4";
  expert.shape = {f, k};
  expert.form = StorageForm::kMxfp4;
  expert.stored.weight = &fp4.info;
  expert.stored.block_scale = &mx_scale.info;
  const double values = 43.0 * 256 * 3 * f * k;
  std::printf("\nV4-Flash's routed experts (%.0f G MXFP4 values) scanned at this rate: %.0f s\n",
              values / 1e9, values * median_ns_per_value(expert, nullptr) / 1e9);
  return 0;
}

// cuda::compressor_pool: the KV compressor's gated softmax pooling, one thread per (entry,
// dim), over the window's slots in the CPU's order (kernels/cpu/compressor.cpp explains the
// slot layout). The exponentials are recomputed instead of stored, which gives the same values.
//
// Dimension letters: S rows, m compress ratio, c halves, d entry width, n entries.
#include <cmath>

#include "kernels/contracts.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace dsv4::kernels::cuda {
namespace {

struct PoolArgs {
  const float* kv;    // [S, c·d]
  const float* gate;  // [S, c·d]
  const float* ape;   // [m, c·d]
  int64_t ratio, n_halves, width, n_entries;
  float* out;  // [n, d]
};

__global__ void compressor_pool_kernel(PoolArgs a) {
  const int64_t idx = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (idx >= a.n_entries * a.width) return;
  const int64_t w = idx / a.width, i = idx % a.width;
  const int64_t row_width = a.n_halves * a.width, n_slots = a.n_halves * a.ratio;
  // Slot s is row w·m + s; with overlap the second block's slots read the B half.
  auto offset = [&](int64_t s) {
    return (w * a.ratio + s) * row_width + (s / a.ratio) * a.width + i;
  };
  auto score = [&](int64_t s) {
    return a.gate[offset(s)] + a.ape[(s % a.ratio) * row_width + (s / a.ratio) * a.width + i];
  };
  float max_score = -INFINITY;
  for (int64_t s = 0; s < n_slots; ++s) max_score = fmaxf(max_score, score(s));
  float denom = 0.0f;
  for (int64_t s = 0; s < n_slots; ++s) denom += expf(score(s) - max_score);
  float acc = 0.0f;
  for (int64_t s = 0; s < n_slots; ++s) {
    acc += a.kv[offset(s)] * (expf(score(s) - max_score) / denom);
  }
  a.out[idx] = acc;
}

}  // namespace

void compressor_pool(const CompressorPoolParams& p) {
  const auto [width, n_halves, ratio, n_rows, n_entries] = compressor_pool_dims(p);
  const PoolArgs a{p.kv.data_as<const float>(),
                   p.gate.data_as<const float>(),
                   p.ape.data_as<const float>(),
                   ratio,
                   n_halves,
                   width,
                   n_entries,
                   p.out.data_as<float>()};
  if (n_entries * width == 0) return;
  compressor_pool_kernel<<<element_blocks(n_entries * width), kElementThreads, 0, op_stream()>>>(a);
  check_launch();
}

}  // namespace dsv4::kernels::cuda

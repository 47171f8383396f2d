// The KV compressor's gated softmax pooling of one output element, as a device function:
// compressor_pool's kernel (compressor.cu) and the decode rows' compressor step (decode_rows.cu),
// whose pooled entries then have the bits of a compressor_pool call's.
//
// Dimension letters: S rows, m compress ratio, c halves, d entry width, n entries.
#pragma once

#include <cmath>
#include <cstdint>

namespace dsv4::kernels::cuda {

struct PoolArgs {
  const float* kv;    // [S, c·d]
  const float* gate;  // [S, c·d]
  const float* ape;   // [m, c·d]
  int64_t ratio, n_halves, width, n_entries;
  float* out;  // [n, d]
};

// Dim i of entry w: a softmax over the window's slots in the CPU's order
// (kernels/cpu/compressor.cpp explains the slot layout); the exponentials are recomputed instead of
// stored, which gives the same values.
__device__ inline float pool_element(const PoolArgs& a, int64_t w, int64_t i) {
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
  return acc;
}

}  // namespace dsv4::kernels::cuda

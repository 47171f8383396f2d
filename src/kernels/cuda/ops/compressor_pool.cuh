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

// Slots a thread loads before it uses any: a pass over a window (up to 2 · 128 slots at V4's
// ratios) waits a load latency a batch, not one a slot, which is what an element costs when an
// HCA layer's prompt piece pools two entries and so runs a thousand threads.
constexpr int kPoolBatch = 16;

// Slots [0, n) in batches: `load(s)` of a batch's slots all issued, then `use(value)` of each in
// slot order.
template <typename Load, typename Use>
__device__ __forceinline__ void in_slot_batches(int64_t n, Load load, Use use) {
  using Value = decltype(load(int64_t{0}));
  for (int64_t s0 = 0; s0 < n; s0 += kPoolBatch) {
    Value v[kPoolBatch];
#pragma unroll
    for (int k = 0; k < kPoolBatch; ++k) {
      if (s0 + k < n) v[k] = load(s0 + k);
    }
#pragma unroll
    for (int k = 0; k < kPoolBatch; ++k) {
      if (s0 + k < n) use(v[k]);
    }
  }
}

// Dim i of entry w: a softmax over the window's slots in the CPU's order
// (kernels/cpu/compressor.cpp explains the slot layout); the exponentials are recomputed instead of
// stored, which gives the same values. Each pass loads a batch of slots, then adds them one by one
// in slot order: the sums of a pass a slot at a time.
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
  in_slot_batches(n_slots, score, [&](float x) { max_score = fmaxf(max_score, x); });
  float denom = 0.0f;
  in_slot_batches(n_slots, score, [&](float x) { denom += expf(x - max_score); });
  float acc = 0.0f;
  in_slot_batches(
      n_slots, [&](int64_t s) { return make_float2(score(s), a.kv[offset(s)]); },
      [&](float2 x) { acc += x.y * (expf(x.x - max_score) / denom); });
  return acc;
}

}  // namespace dsv4::kernels::cuda

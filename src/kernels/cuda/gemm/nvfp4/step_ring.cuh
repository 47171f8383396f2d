// A warp's ring of weight steps for the decode-size stream kernels (expert_stream.cu and
// stream_kernel.cuh, in this folder). Lane (g, c) owns, per 128-element K step, 16 packed bytes
// of each of its two rows and their block scales (pair_layout.cuh's StepWeights). Every ring
// is read by the same loop, pair_layout.cuh's mma_weight_steps:
//   for step s (stage s % kStages):  w = ring.take(stage, s);  ... decode, MMA ...;
//                                     ring.refill(stage, s + kStages);
//
// Three storages, chosen by the kernels' token chunks (docs/bench_log.md, "NVFP4 MoE layer"):
// - RegisterStepRing: the steps in registers, loaded with plain loads. ptxas tracks all of the
//   ring's loads on one scoreboard and waits for all of them at once, so a 4-step ring drains
//   every fourth step; and the two block-scale loads of a step are joined as soon as they are
//   loaded, so the warp waits for them right there (an L2 or HBM latency every fourth step).
// - SlabStepRing: the codes in a RegisterStepRing, the block scales from the warp's scale slab:
//   all of its rows' scales for the whole of K, copied into shared memory once per pass with
//   cp.async while the ring's first loads are in flight. A step's scales are then two shared
//   loads, never a wait on global memory: the faster one at one token chunk.
// - SharedStepRing: the steps in shared memory, copied with cp.async by each lane for itself
//   (so no barrier, only the lane's own groups, one per step). cp.async.wait_group N waits for
//   all but the newest N, so kStages − 1 steps stay in flight at every step, and the ring costs
//   no registers: faster at two token chunks, whose accumulators and operands crowd a register
//   ring.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device/pair_layout.cuh"

namespace dsv4::kernels::cuda {

// Where a lane's steps come from: its first code byte of step 0 in each of its two rows
// (lane c's 16 of the row's 64 per step), the rows' first scale byte of step 0 (8 per step),
// and the number of steps.
struct StepSource {
  const uint8_t *codes_lo, *codes_hi, *scales_lo, *scales_hi;
  int n_steps;
};

inline constexpr int kRingStepK = 128;  // K elements of one step (4 lanes × 32)
inline constexpr int kStepCodeBytes = kRingStepK / 2;    // one row's codes in one step
inline constexpr int kStepScaleBytes = kRingStepK / 16;

// kWithScales: the ring loads each step's block scales too (false: the caller gets them
// elsewhere, and take() leaves StepWeights::scales unset).
template <int kStagesIn, bool kWithScales = true>
class RegisterStepRing {
 public:
  static constexpr int kStages = kStagesIn;
  static constexpr int kSharedBytes = 0;  // of a block

  __device__ __forceinline__ explicit RegisterStepRing(const StepSource& source)
      : source_(source),
        scales_lo_(reinterpret_cast<const uint16_t*>(source.scales_lo) + threadIdx.x % 4),
        scales_hi_(reinterpret_cast<const uint16_t*>(source.scales_hi) + threadIdx.x % 4) {
#pragma unroll
    for (int d = 0; d < kStages; ++d) refill(d, d);
  }

  __device__ __forceinline__ const StepWeights& take(int stage, int /*step*/) const {
    return ring_[stage];
  }

  // Stage `stage` (whose values the caller has used) takes step s.
  __device__ __forceinline__ void refill(int stage, int s) {
    if (s >= source_.n_steps) return;
    ring_[stage].lo = load_weights_once(source_.codes_lo + s * kStepCodeBytes);
    ring_[stage].hi = load_weights_once(source_.codes_hi + s * kStepCodeBytes);
    if constexpr (kWithScales) {
      ring_[stage].scales = __ldg(scales_lo_ + s * (kStepScaleBytes / 2)) |
                            (uint32_t{__ldg(scales_hi_ + s * (kStepScaleBytes / 2))} << 16);
    }
  }

 private:
  StepSource source_;
  const uint16_t *scales_lo_, *scales_hi_;  // lane c's two scales of a row: one u16
  StepWeights ring_[kStages];
};

// kWarps: the warps of the block (each has its own kStages stages of shared memory).
template <int kStagesIn, int kWarps>
class SharedStepRing {
  // One stage: 32 lanes × (16 + 16 code bytes, 4 + 4 scale bytes).
  static constexpr int kLoCodes = 0, kHiCodes = 512, kLoScales = 1024, kHiScales = 1152;
  static constexpr int kStageBytes = 1280;

 public:
  static constexpr int kStages = kStagesIn;
  static constexpr int kSharedBytes = kWarps * kStages * kStageBytes;  // of a block
  static_assert(kStages >= 2, "one step in use, at least one in flight");

  __device__ __forceinline__ explicit SharedStepRing(const StepSource& source)
      : source_(source),
        ring_(warp_storage()),
        lane_(threadIdx.x % 32),
        // Lane c's two scales of a row are bytes 2c, 2c + 1 of the step's 8: it copies the
        // aligned 4 that hold them (lanes c = 0, 1 the first 4, c = 2, 3 the second) and picks
        // its half.
        scale_offset_(lane_ % 4 / 2 * 4),
        scale_select_(lane_ % 2 ? 0x7632u : 0x5410u) {
#pragma unroll
    for (int d = 0; d < kStages; ++d) refill(d, d);
  }

  // The step in `stage`, once its copies have landed (every later step's group may pend).
  __device__ __forceinline__ StepWeights take(int stage, int /*step*/) const {
    cp_async_wait<kStages - 1>();
    const uint8_t* src = ring_ + stage * kStageBytes;
    StepWeights w;
    w.lo = *reinterpret_cast<const uint4*>(src + kLoCodes + lane_ * 16);
    w.hi = *reinterpret_cast<const uint4*>(src + kHiCodes + lane_ * 16);
    w.scales = __byte_perm(*reinterpret_cast<const uint32_t*>(src + kLoScales + lane_ * 4),
                           *reinterpret_cast<const uint32_t*>(src + kHiScales + lane_ * 4),
                           scale_select_);
    return w;
  }

  // Stage `stage` (read by take) takes step s; past the last step an empty group, so that
  // every step commits one and take's wait count holds.
  __device__ __forceinline__ void refill(int stage, int s) const {
    if (s < source_.n_steps) {
      uint8_t* dst = ring_ + stage * kStageBytes;
      // Codes past L1 (read once), L2 fetching the row's next steps; scales through L1 (the
      // row's next three steps read the same sector).
      cp_async16<true>(dst + kLoCodes + lane_ * 16, source_.codes_lo + s * kStepCodeBytes);
      cp_async16<true>(dst + kHiCodes + lane_ * 16, source_.codes_hi + s * kStepCodeBytes);
      const int scales = s * kStepScaleBytes + scale_offset_;
      cp_async4(dst + kLoScales + lane_ * 4, source_.scales_lo + scales);
      cp_async4(dst + kHiScales + lane_ * 4, source_.scales_hi + scales);
    }
    cp_async_commit();
  }

 private:
  __device__ __forceinline__ static uint8_t* warp_storage() {
    __shared__ __align__(16) uint8_t storage[kWarps][kStages][kStageBytes];
    return &storage[threadIdx.x / 32][0][0];
  }

  StepSource source_;
  uint8_t* ring_;
  int lane_, scale_offset_;
  uint32_t scale_select_;
};

// Codes in a register ring of kStages steps, block scales from the warp's slab in shared memory.
// The slab holds the 16 rows of the warp's m-tile (lo rows g, then hi rows g + 8) over its
// kSteps steps (even, so that a row's scales are whole 16-byte copies, and 16-byte aligned in
// global memory), each row padded by 16 bytes so that the 8 rows a step reads fall in 8
// different banks.
template <int kStagesIn, int kWarps, int kSteps>
class SlabStepRing {
  static constexpr int kRowChunks = kSteps * kStepScaleBytes / 16;  // copies of a row's scales
  static constexpr int kRowBytes = kSteps * kStepScaleBytes + 16;

 public:
  static constexpr int kStages = kStagesIn;
  static constexpr int kSharedBytes = kWarps * 16 * kRowBytes;  // of a block
  static_assert(kSteps % 2 == 0, "whole 16-byte copies of a row's scales");

  // Starts the code ring (its member is built first), copies the slab (each lane a quarter of
  // its two rows), then waits for the slab: its latency and the first code steps' overlap.
  __device__ __forceinline__ explicit SlabStepRing(const StepSource& source)
      : codes_(source), slab_(warp_storage()), lane_(threadIdx.x % 32) {
    const int g = lane_ / 4, c = lane_ % 4;
#pragma unroll
    for (int i = c; i < kRowChunks; i += 4) {
      cp_async16(slab_ + g * kRowBytes + i * 16, source.scales_lo + i * 16);
      cp_async16(slab_ + (8 + g) * kRowBytes + i * 16, source.scales_hi + i * 16);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncwarp();
  }

  __device__ __forceinline__ StepWeights take(int stage, int step) const {
    StepWeights w = codes_.take(stage, step);
    // Lane c's two scales of a row in step s: bytes 8 s + 2 c and + 1.
    const int offset = (lane_ / 4) * kRowBytes + step * kStepScaleBytes + lane_ % 4 * 2;
    w.scales = *reinterpret_cast<const uint16_t*>(slab_ + offset) |
               uint32_t{*reinterpret_cast<const uint16_t*>(slab_ + 8 * kRowBytes + offset)} << 16;
    return w;
  }

  __device__ __forceinline__ void refill(int stage, int s) { codes_.refill(stage, s); }

 private:
  __device__ __forceinline__ static uint8_t* warp_storage() {
    __shared__ __align__(16) uint8_t storage[kWarps][16 * kRowBytes];
    return storage[threadIdx.x / 32];
  }

  RegisterStepRing<kStagesIn, /*kWithScales=*/false> codes_;
  uint8_t* slab_;
  int lane_;
};

// The ring of a stream kernel with kChunks token chunks of 8, kWarps warps a block and kSteps steps
// a warp (0: not a compile-time constant): at one chunk 4 steps in registers, their scales from the
// slab with kScaleSlab; at two 8 steps in shared memory (measured: docs/bench_log.md, "NVFP4 MoE
// layer"), a register ring no deeper than the warp's steps. The slab pays for itself in the MoE
// kernel, whose warps stream all of K (16-56 steps) from shared-memory activations; the dense
// stream GEMM's warps run 4-14 steps, too few to hide its copy (1-2 µs slower at M ≤ 8). The
// generic-K loop keeps the plain register ring, since with the shared one ptxas 13.0 spills 132-140
// bytes there.
template <int kChunks, int kWarps, int kSteps, bool kScaleSlab = false>
using StreamStepRing = std::conditional_t<
    kSteps == 0 || (kChunks == 1 && !kScaleSlab),
    RegisterStepRing<(kSteps > 0 && kSteps < 4 ? kSteps : 4)>,
    std::conditional_t<kChunks == 1, SlabStepRing<4, kWarps, kSteps>, SharedStepRing<8, kWarps>>>;

}  // namespace dsv4::kernels::cuda

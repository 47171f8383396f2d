// Tile shapes of the sm_90a FP8 GEMM kernels (README.md explains the choices). Plain C++: the
// host plan and the device code read the same numbers.
#pragma once

namespace dsv4::kernels::cuda::sm90 {

// ---- The warp-specialised wgmma kernel (ws_kernel.cuh), DeepGEMM's sm90 FP8 GEMM shape ----
// A CTA tile is 128 tokens × 128 weight rows; a K step is one scale block of 128 columns, which
// is one 128-byte swizzle row of e4m3, so one TMA box per operand and stage.
inline constexpr int kFp8TileM = 128;      // tokens per tile: two consumer warpgroups × 64
inline constexpr int kFp8TileN = 128;      // weight rows per tile: one block-scale row, wgmma N
inline constexpr int kFp8TileK = 128;      // K per stage = the scale block
inline constexpr int kFp8WsThreads = 384;  // producer warpgroup + two consumer warpgroups
inline constexpr int kFp8StageBytes = (kFp8TileM + kFp8TileN) * kFp8TileK;  // 32 KB
inline constexpr int kFp8Stages = 6;        // 192 KB of ring: the most under 227 KB with room
inline constexpr int kFp8SmemAlign = 1024;  // 128-byte swizzle atoms
inline constexpr int kFp8SmemBytes =
    kFp8Stages * kFp8StageBytes + 2 * kFp8Stages * 8 + kFp8SmemAlign;
// setmaxnreg: the producer needs few registers, each consumer thread holds a 64 × 128 tile's
// partial and promoted sums (128 f32). 40 · 128 + 232 · 256 ≤ 168 · 384 (the launch's cap).
inline constexpr int kFp8ProducerRegs = 40;
inline constexpr int kFp8ConsumerRegs = 232;
static_assert(kFp8ProducerRegs * 128 + kFp8ConsumerRegs * 256 <= 168 * kFp8WsThreads,
              "setmaxnreg cannot hand out more registers than the CTA was launched with");
inline constexpr int kFp8Panel = 8;  // token tiles walked together (their A and B stay in L2)

// ---- The stream kernel (stream_kernel.cuh, M ≤ kFp8StreamMaxTokens): swap-AB mma.sync
// m16n8k32, a CTA per 16 weight rows, its warps each a run of K blocks ----
inline constexpr int kFp8StreamRows = 16;       // weight rows per CTA: the MMA's M
inline constexpr int kFp8StreamMaxTokens = 64;  // 8 chunks of the MMA's n8
inline constexpr int kFp8StreamBatch = 4;       // K blocks whose weight loads fly together
inline constexpr int kFp8StreamMaxWarps = 16;

}  // namespace dsv4::kernels::cuda::sm90

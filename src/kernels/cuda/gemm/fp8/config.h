// Tile shapes of the sm_90a FP8 GEMM kernels (README.md explains the choices). Plain C++: the
// host plan and the device code read the same numbers.
#pragma once

namespace dsv4::kernels::cuda::sm90 {

// ---- The warp-specialised wgmma kernel (ws_kernel.cuh), DeepGEMM's sm90 FP8 GEMM shape ----
// A CTA tile is kTileM tokens × 128 weight rows; a K step is one scale block of 128 columns,
// which is one 128-byte swizzle row of e4m3, so one TMA box per operand and stage. kTileM is
// 256 (each consumer warpgroup two m64 halves in turn) where those tiles fill the GPU, else 128
// (one m64 each): a stage's bytes per flop fall by 1.37× from 128 to 256 tokens, and L2's
// bandwidth bounds the 128-token tile (docs/bench_log.md, "FP8 GEMM").
inline constexpr int kFp8TileN = 128;       // weight rows per tile: one block-scale row, wgmma N
inline constexpr int kFp8TileK = 128;       // K per stage = the scale block
inline constexpr int kFp8WsThreads = 384;   // producer warpgroup + two consumer warpgroups
inline constexpr int kFp8SmemAlign = 1024;  // 128-byte swizzle atoms
inline constexpr int kFp8RingBytes = 192 * 1024;  // the most under 227 KB with room
inline constexpr int fp8_stage_bytes(int tile_m) { return (tile_m + kFp8TileN) * kFp8TileK; }
inline constexpr int fp8_stages(int tile_m) { return kFp8RingBytes / fp8_stage_bytes(tile_m); }
inline constexpr int fp8_smem_bytes(int tile_m) {
  return fp8_stages(tile_m) * fp8_stage_bytes(tile_m) + 2 * fp8_stages(tile_m) * 8 + kFp8SmemAlign;
}
static_assert(fp8_stages(128) == 6 && fp8_stages(256) == 4, "ring depth per tile");
// setmaxnreg: the producer needs few registers; a consumer thread holds its tokens' promoted
// sums (64 f32 per m64 half) and one m64 partial (64). 40 · 128 + 232 · 256 ≤ 168 · 384 (the
// launch's cap).
inline constexpr int kFp8ProducerRegs = 40;
inline constexpr int kFp8ConsumerRegs = 232;
static_assert(kFp8ProducerRegs * 128 + kFp8ConsumerRegs * 256 <= 168 * kFp8WsThreads,
              "setmaxnreg cannot hand out more registers than the CTA was launched with");
inline constexpr int kFp8Panel = 8;  // token tiles walked together (their A and B stay in L2)

// ---- The stream kernel (stream_kernel.cuh, M ≤ kFp8StreamMaxTokens): swap-AB mma.sync
// m16n8k32, a cluster of 1-8 CTAs per 16 weight rows, its warps each a run of K blocks ----
inline constexpr int kFp8StreamRows = 16;       // weight rows per tile: the MMA's M
inline constexpr int kFp8StreamMaxTokens = 64;  // 8 chunks of the MMA's n8
inline constexpr int kFp8StreamBatch = 4;       // K blocks whose weight loads fly together
inline constexpr int kFp8StreamMaxWarps = 16;
inline constexpr int kFp8StreamMaxSplit = 8;  // CTAs sharing a tile's K: the portable cluster
// A CTA of a split tile keeps at least this many K blocks (16 rows × 512 bytes): fewer would
// spend more on the cluster's two barriers and the shared-memory reduction than they stream.
inline constexpr int kFp8StreamMinSplitBlocks = 4;

}  // namespace dsv4::kernels::cuda::sm90

// Tile shapes of the sm_90a NVFP4 GEMM kernels (README.md explains the choice). Plain C++: the
// host plan and the device code read the same numbers.
#pragma once

namespace dsv4::kernels::cuda::sm90 {

// ---- The warp-specialised kernel's K steps, raw weight rows and tile table ----
inline constexpr int kTileK = 64;        // K step: one 128-byte swizzle row of bf16
inline constexpr int kRawRowBytes = 48;  // 32 B codes + 4 B scales, padded: conflict-free reads
inline constexpr int kMaxGroups = 1024;  // experts per grouped call (smem tile table)
inline constexpr int kSmemTable = 2 * (kMaxGroups + 1) * 4;  // group offsets + tile prefix
inline constexpr int kSmemAlign = 1024;                        // 128B swizzle atoms

// ---- The warp-specialised wgmma kernel (large M, ws_kernel.cuh): swap-AB, so the decoded
// weights are wgmma's register operand A (64 weight rows per consumer warpgroup) and the tokens
// its shared-memory operand B (32, 64, 128 or 256 tokens per tile) ----
inline constexpr int kWsRows = 128;           // weight rows (N) per CTA: two consumers × 64
inline constexpr int kWsThreads = 384;        // producer warpgroup + two consumer warpgroups
// setmaxnreg moves registers between warpgroups of the CTA but never adds any: the sum must
// stay within the launch allocation, 168 (the cap of __launch_bounds__(384, 1)) × 384, or the
// consumers' increase waits forever. Per token tile (kBM 256 / 128), the splits where neither
// side spills: 88 / 208 (128 accumulators per consumer thread) and 120 / 192 (64).
// Narrow token tiles (32 or 64 tokens) run two CTAs an SM, each with half the ring and the
// registers: their consumers wait on the decode's latency more than on the tensor cores, and
// twice the warps hide more of it (4-9 % faster than one CTA on an H100: docs/bench_log.md,
// "NVFP4 GEMM"). Two CTAs cap a thread at 80 registers: the split is 40 / 96 (at
// most 32 accumulators per consumer thread).
inline constexpr int ws_ctas_per_sm(int bm) { return bm <= 64 ? 2 : 1; }
inline constexpr int ws_launch_regs(int bm) { return ws_ctas_per_sm(bm) == 1 ? 168 : 80; }
inline constexpr int ws_producer_regs(int bm) {
  return ws_ctas_per_sm(bm) == 2 ? 40 : bm == 256 ? 88 : 120;
}
inline constexpr int ws_consumer_regs(int bm) {
  return ws_ctas_per_sm(bm) == 2 ? 96 : bm == 256 ? 208 : 192;
}
inline constexpr bool ws_regs_fit(int bm) {
  return ws_producer_regs(bm) * 128 + ws_consumer_regs(bm) * 256 <=
         ws_launch_regs(bm) * kWsThreads;
}
static_assert(ws_regs_fit(256) && ws_regs_fit(128) && ws_regs_fit(64) && ws_regs_fit(32),
              "setmaxnreg cannot hand out more registers than the CTA was launched with");
inline constexpr int kWsSmemBudget = 200 * 1024;  // ring stages of an SM, below the 227 KB limit
inline constexpr int kWsPanel = 8;            // token tiles walked together (L2 reuse)

// ---- The small-M kernel (decode): swap-AB mma.sync m16n8k16, weights decoded in registers.
// A CTA is 8 warps × 16 weight rows and a K slice of whole 128-element chunks; up to
// kSmallMaxTiles n8 tiles of tokens per pass ----
inline constexpr int kSmallWarps = 8;
inline constexpr int kSmallThreads = kSmallWarps * 32;
inline constexpr int kSmallRows = kSmallWarps * 16;  // weight rows (N) per CTA
inline constexpr int kSmallChunk = 128;              // K per warp step: 4 threads × 32 codes
inline constexpr int kSmallBatch = 4;                // chunks whose loads are in flight together
inline constexpr int kSmallMaxTiles = 8;             // ≤ 64 tokens per pass
inline constexpr int kSmallMaxSmem = 64 * 1024;      // the token slice in shared memory

// ---- The stream kernel (decode, one matrix, stream_kernel.cuh): a CTA of kStreamWarps warps
// per 16-row m-tile, each warp an equal run of the 128-element K steps, partials met in shared
// memory; no split-K over CTAs ----
inline constexpr int kStreamWarps = 4;
inline constexpr int kStreamStepK = 128;      // K per warp step: 4 lanes × 32 codes
inline constexpr int kStreamMaxTokens = 16;   // two MMA token chunks
inline constexpr int kStreamMinBlocksPerSm = 4;  // 128 registers a thread

// Weights are read with rows padded to a multiple of kTileK codes (README: "layouts").
inline constexpr int kWeightKAlign = kTileK;

}  // namespace dsv4::kernels::cuda::sm90

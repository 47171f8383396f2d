// Tile shapes of the sm_90a NVFP4 GEMM kernels (README.md explains the choice). Plain C++: the
// host heuristics and the device code read the same numbers.
#pragma once

namespace dsv4::kernels::cuda::sm90 {

// ---- The wgmma kernel (large M): a 128×256 output tile per CTA, two consumer warpgroups of
// 64 rows each, K in steps of 64 (one 128-byte swizzle row of bf16) ----
inline constexpr int kTileM = 128;
inline constexpr int kTileN = 256;
inline constexpr int kTileK = 64;
inline constexpr int kStages = 4;        // cp.async ring depth for A (bf16) and raw B (NVFP4)
inline constexpr int kThreads = 256;     // two warpgroups
inline constexpr int kRawRowBytes = 48;  // 32 B codes + 4 B scales, padded: conflict-free reads
inline constexpr int kMaxGroups = 1024;  // experts per grouped call (smem tile table)

inline constexpr int kSmemA = kStages * kTileM * kTileK * 2;  // bf16 ring, 128B-swizzled
inline constexpr int kSmemB = 2 * kTileN * kTileK * 2;        // decoded bf16 B, double-buffered
inline constexpr int kSmemRaw = kStages * kTileN * kRawRowBytes;
inline constexpr int kSmemTable = 2 * (kMaxGroups + 1) * 4;  // group offsets + tile prefix
inline constexpr int kSmemAlign = 1024;                        // 128B swizzle atoms
inline constexpr int kSmemBytes = kSmemA + kSmemB + kSmemRaw + kSmemTable + kSmemAlign;

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

// Weights are read with rows padded to a multiple of kTileK codes (README: "layouts").
inline constexpr int kWeightKAlign = kTileK;

}  // namespace dsv4::kernels::cuda::sm90

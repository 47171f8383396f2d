// Tile sizes of the dense linear's kernels, read by their plan (plan.cpp) and by the device
// code alike, so the choice of a kernel and the kernel agree on its tiles. Plain C++.
#pragma once

namespace dsv4::kernels::cuda {

// ---- linear_tensor_cores.cu: a block computes 128 tokens × 128 outputs ----
inline constexpr int kTensorCoreTileT = 128;
inline constexpr int kTensorCoreTileN = 128;

// ---- linear_few_rows_tensor_cores.cu: a CTA owns 16 outputs (the MMA's M) for chunks of 8
// tokens (its N); its warps split K in steps of 32 ----
inline constexpr int kFewRowsTcRows = 16;
inline constexpr int kFewRowsTcTokens = 8;
inline constexpr int kFewRowsTcStepK = 32;
inline constexpr int kFewRowsTcMaxTokens = 16;  // two chunks; more rows go to the other kernels

// ---- linear_cuda_cores.cu ----
inline constexpr int kTiledTile = 64;    // the tiled kernel: rows of x and of w a block
inline constexpr int kFewRowsChunk = 8;  // the few-rows kernel: most tokens of one block
// The few-rows kernel's shape below 128 outputs: one output a group of 16 warps, each a slice of
// K. linear_narrow.cu sums the same slices in the same order, so both give the same bits.
inline constexpr int kFewRowsNarrowSplit = 16;

// ---- linear_narrow.cu: many rows, at most kNarrowMaxOutputs outputs ----
inline constexpr int kNarrowWarps = 8;                      // a block; each owns outputs of its own
inline constexpr int kNarrowMaxOutputs = 8 * kNarrowWarps;  // 8 outputs a warp
inline constexpr int kNarrowMinRows = 64;                   // fewer stay on the few-rows kernel
inline constexpr int kNarrowMaxCluster = 8;                 // blocks sharing a tile's 16 slices
// Tokens a block, by outputs a warp (1, 2, 3, 4 or 8): each lane accumulates outputs × tokens.
constexpr int narrow_tokens(int outputs_a_warp) { return outputs_a_warp <= 4 ? 16 : 8; }

}  // namespace dsv4::kernels::cuda

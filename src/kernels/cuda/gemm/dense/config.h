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

}  // namespace dsv4::kernels::cuda

// Which FP8 kernel runs a GEMM, and on what grid: the one place that decides for the FP8 family
// (plan.cpp gives the reasons), from the call's shape alone. Plain C++; launch.cu runs a plan,
// the benchmark prints it (describe).
//
// Dimension letters: M rows (tokens), N output features, K input features.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cuda/gemm/fp8/config.h"

namespace dsv4::kernels::cuda::sm90 {

enum class Fp8GemmPath {
  kWsWgmma,  // ws_kernel.cuh: warp-specialised wgmma with TMA, many rows
  kStream,   // stream_kernel.cuh: weight streaming with mma.sync, up to 64 rows
};

struct Fp8GemmPlan {
  Fp8GemmPath path = Fp8GemmPath::kWsWgmma;
  int grid = 0;           // kWsWgmma: persistent CTAs, one an SM
  int ws_tile_m = 128;    // kWsWgmma: tokens a tile (128 or 256)
  int stream_warps = 4;   // kStream: warps a CTA, each an equal run of K blocks (4, 8 or 16)
  int stream_chunks = 1;  // kStream: 8-token chunks (1, 2, 4 or 8)
  int stream_split = 1;   // kStream: CTAs (one cluster) sharing a 16-row tile's K (1, 2, 4 or 8)
};

// m: M; n: all output rows (G·R for a block-diagonal call, whose plan is the N = G·R one's);
// n_sm: multiprocessors on the device.
Fp8GemmPlan plan_fp8_gemm(int64_t m, int64_t n, int64_t k, int n_sm);

// The stream kernel's plan for this shape, whatever M ≤ 64 is, with at most max_split CTAs a
// tile (the benchmark times it against the wgmma kernel, and against itself unsplit).
Fp8GemmPlan plan_fp8_stream(int64_t m, int64_t n, int64_t k, int n_sm,
                            int max_split = kFp8StreamMaxSplit);

// The warp-specialised kernel with tile_m-token tiles on a persistent grid, whatever M is (the
// plan's choice for M > 64; the benchmark times it against the others).
Fp8GemmPlan plan_fp8_ws(int64_t m, int64_t n, int tile_m, int n_sm);

// One line for benchmarks and logs, e.g. "ws 256x128, 132 CTAs", "stream 16 warps, 8 tok" or
// "stream 8 warps x 2 CTAs, 8 tok".
std::string describe(const Fp8GemmPlan& plan);

}  // namespace dsv4::kernels::cuda::sm90

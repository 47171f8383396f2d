// The dense linear for many rows and few outputs on the CUDA cores (DenseKernel::kNarrow, chosen
// by plan.cpp): y[T, N] = x[T, K] · w[N, K]ᵀ with N ≤ kNarrowMaxOutputs and T from
// kNarrowMinRows on: mHC's 24 mixes of a 16384-wide residual, the indexer's 64 head weights of a
// prompt. The few-rows kernel (linear_cuda_cores.cu) gives such a call a block an output and 8
// tokens, so every row of x crosses L2 once per output (24 times for mHC). Here a block owns a
// tile of tokens and every output, so x crosses once:
// - its 8 warps each own ≤ 8 outputs (1, 2, 3, 4 or 8 a warp, by N: plan.cpp) and read their
//   weight rows from L2 (≤ 64 rows stay resident there); the tile of x goes through shared
//   memory (cp.async, two buffers) in steps of 32 runs of 4 elements, read from DRAM once and
//   by every warp from shared memory;
// - tokens a tile: 16 with ≤ 4 outputs a warp, 8 with 8 (config.h: each lane accumulates
//   outputs × tokens in registers);
// - the summation is the few-rows kernel's for N < 128 (config.h's kFewRowsNarrowSplit): K's
//   runs of 4 in 16 slices, lane l of a slice sums its runs l, l + 32, … in order (four fmaf a
//   run), the lanes meet in warp_reduce's tree (by warp_sums: 32 sums for 31 shuffles, where
//   warp_reduce's 5 a sum would cost more than the FMAs at K = 4096), and the 16 slice sums
//   add left to right. So a row gets the few-rows kernel's bits whatever T and whichever block
//   holds it: where the plan switches kernels (kNarrowMinRows) no row changes.
// - the grid: the 16 slices of a tile are split over a thread block cluster of 2, 4 or 8 blocks
//   (plan.cpp: the fewest that give every SM two blocks, so a 256-row call still fills 132 SMs
//   with 16 tiles). Each block keeps its slices' sums in shared memory; then the cluster's
//   blocks read them through distributed shared memory and add them in slice order, each block
//   a share of the tile's outputs. No float atomics and no scratch; the cluster's size changes
//   which block adds, never the order.
// It takes rows that 16-byte loads can read (x 16-byte aligned, K and both strides multiples of
// 4) and one group; plan.cpp leaves other calls on the few-rows kernel.
//
// Dimension letters: T tokens (rows of x), N output features (rows of w), K input features.
#include <cooperative_groups.h>

#include "kernels/contracts.h"
#include "kernels/cuda/device/cluster_launch.cuh"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/device/mma_sync.cuh"
#include "kernels/cuda/device/warp_sums.cuh"
#include "kernels/cuda/gemm/dense/config.h"
#include "kernels/cuda/gemm/dense/cuda_core_rows.cuh"
#include "kernels/cuda/gemm/dense/kernels.h"

namespace dsv4::kernels::cuda {
namespace {

using namespace cuda_core_rows;

constexpr int kWarps = kNarrowWarps;
constexpr int kThreads = 32 * kWarps;
constexpr int kSlices = kFewRowsNarrowSplit;
constexpr int kMostSlices = kSlices / 2;  // a block's, in a cluster of ≥ 2

// The first run of 4 of K's slice s (slice kSlices: the end): the few-rows kernel's split.
__device__ __forceinline__ int64_t slice_begin(int64_t runs, int s) { return s * runs / kSlices; }

// A step of x's tile: runs [u, min(u + 32, end of slice s)); s == last: past the block's last.
struct Step {
  int s;
  int64_t u;
};
// Moves a step that starts past its slice to the next slice with runs (or to `last`).
__device__ __forceinline__ void settle(Step& step, int last, int64_t runs) {
  while (step.s < last && step.u >= slice_begin(runs, step.s + 1)) {
    ++step.s;
    step.u = slice_begin(runs, step.s);
  }
}

// Block (r, y) of a cluster of C along x: tokens [kTokens·y, +kTokens), every output, slices
// [r·16/C, (r+1)·16/C). Rows past x read its last row and are never stored.
// Two blocks an SM (≤ 128 registers a thread) up to 4 outputs a warp; with 8, whose 64
// accumulators and 8 weight runs would spill there, one.
template <int kOuts, typename W>
__global__ void __launch_bounds__(kThreads, kOuts <= 4 ? 2 : 1)
    linear_narrow_kernel(Rows<float> x, W w, RowMatrix y) {
  constexpr int kTokens = narrow_tokens(kOuts);
  constexpr int kBlockOuts = kOuts * kWarps;
  constexpr int kPairs = kOuts * kTokens;  // a warp's (output, token) sums
  __shared__ float4 x_tile[2][kTokens][32];
  __shared__ float sums[kMostSlices][kTokens][kBlockOuts];
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int blocks = static_cast<int>(cluster.num_blocks());
  const int per_block = kSlices / blocks, first = rank * per_block, last = first + per_block;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t runs = x.n_cols / kVec, t0 = blockIdx.y * int64_t{kTokens};
  const int n0 = warp * kOuts;
  const bool busy = n0 < w.n_rows;  // warps past N only stage x
  typename W::Row w_rows[kOuts];
#pragma unroll
  for (int c = 0; c < kOuts; ++c) w_rows[c] = w.row(min(int64_t{n0 + c}, w.n_rows - 1));

  // Step `step` of every token's row into buffer `buf` (zeros past the slice).
  const auto stage = [&](const Step& step, int buf) {
    const int64_t end = slice_begin(runs, step.s + 1);
    for (int i = threadIdx.x; i < kTokens * 32; i += kThreads) {
      const int t = i / 32, r = i % 32;
      const bool valid = step.u + r < end;
      const float* row = x.row(min(t0 + t, x.n_rows - 1));
      cp_async16(&x_tile[buf][t][r], row + (valid ? step.u + r : step.u) * kVec, valid);
    }
  };

  // `next`: the step being consumed, then the one after it, staged one step ahead.
  Step next{first, slice_begin(runs, first)};
  settle(next, last, runs);
  if (next.s < last) stage(next, 0);
  cp_async_commit();
  int buf = 0;
  for (int s = first; s < last; ++s) {
    float acc[kOuts][kTokens] = {};
    const int64_t end = slice_begin(runs, s + 1);
    for (int64_t u0 = slice_begin(runs, s); u0 < end; u0 += 32) {
      next.u += 32;
      settle(next, last, runs);
      if (next.s < last) stage(next, buf ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
      __syncthreads();  // step u0 is in x_tile[buf] for every thread
      const int64_t u = u0 + lane;
      if (busy && u < end) {
        float4 wk[kOuts];
#pragma unroll
        for (int c = 0; c < kOuts; ++c) wk[c] = load4(w_rows[c], u * kVec);
#pragma unroll
        for (int t = 0; t < kTokens; ++t) {
          const float4 xk = x_tile[buf][t][lane];
#pragma unroll
          for (int c = 0; c < kOuts; ++c) acc[c][t] = fma4(wk[c], xk, acc[c][t]);
        }
      }
      __syncthreads();  // x_tile[buf] read by every warp before it is staged again
      buf ^= 1;
    }
    if (busy) {  // the slice's sums, 32 (output, token) pairs at a time
#pragma unroll
      for (int p0 = 0; p0 < kPairs; p0 += 32) {
        float v[32];
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          v[j] = p0 + j < kPairs ? acc[(p0 + j) / kTokens][(p0 + j) % kTokens] : 0.0f;
        }
        const float sum = warp_sums(v);
        const int p = p0 + lane;
        if (p < kPairs) sums[s - first][p % kTokens][n0 + p / kTokens] = sum;
      }
    }
  }

  cluster.sync();  // every block's slice sums written
  for (int i = rank * kThreads + threadIdx.x; i < kTokens * kBlockOuts; i += blocks * kThreads) {
    const int t = i / kBlockOuts, n = i % kBlockOuts;
    if (n >= y.n_cols || t0 + t >= y.n_rows) continue;
    float sum = *cluster.map_shared_rank(&sums[0][t][n], 0);
    for (int s = 1; s < kSlices; ++s) {
      sum += *cluster.map_shared_rank(&sums[s % per_block][t][n], s / per_block);
    }
    y.data[(t0 + t) * y.row_stride + n] = sum;
  }
  cluster.sync();  // no block leaves while another may still read its sums
}

// A cluster of `cluster` blocks (2, 4 or 8) a tile of tokens.
template <int kOuts, typename W>
void launch_narrow_as(const Rows<float>& x, const W& w, const RowMatrix& y, int cluster) {
  launch_clusters(linear_narrow_kernel<kOuts, W>,
                  dim3(static_cast<unsigned>(cluster),
                       static_cast<unsigned>(ceil_div(x.n_rows, narrow_tokens(kOuts)))),
                  dim3(kThreads), cluster, x, w, y);
}

template <typename W>
void launch_narrow(const Rows<float>& x, const W& w, const RowMatrix& y, const DensePlan& plan) {
  DSV4_CHECK(vector_rows(x) && vector_rows(w) && w.n_rows <= kWarps * plan.cols &&
                 kSlices % plan.split == 0 && plan.split >= 2 && plan.split <= kNarrowMaxCluster &&
                 plan.tokens == narrow_tokens(plan.cols),
             "linear: no narrow kernel for %lld outputs as %d a warp, %d tokens, %d blocks",
             (long long)w.n_rows, plan.cols, plan.tokens, plan.split);
  switch (plan.cols) {
    case 1:
      return launch_narrow_as<1>(x, w, y, plan.split);
    case 2:
      return launch_narrow_as<2>(x, w, y, plan.split);
    case 3:
      return launch_narrow_as<3>(x, w, y, plan.split);
    case 4:
      return launch_narrow_as<4>(x, w, y, plan.split);
    case 8:
      return launch_narrow_as<8>(x, w, y, plan.split);
    default:
      DSV4_CHECK(false, "linear: no narrow kernel of %d outputs a warp", plan.cols);
  }
}

}  // namespace

void linear_narrow(const LinearOperands& o, const DensePlan& plan) {
  with_rows(o, [&](const auto& x, const auto& w) { launch_narrow(x, w, o.y, plan); });
  check_launch();
}

}  // namespace dsv4::kernels::cuda

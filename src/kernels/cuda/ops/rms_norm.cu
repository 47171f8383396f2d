// cuda::rms_norm in the CPU's bits: both sum the squares in rms_norm's lane order (ops.h,
// kRmsNormLanes) in double, and scale with the same f32 expression, x · inv_rms · weight.
//
// A decode step norms one to a few rows of 4096 (the block inputs) or 16384 (the mHC streams):
// a block a row would be one SM's serial work, latency-bound (22 one-block launches took
// 0.15 ms of a 4-layer V4-Flash step under ncu, H100). A wide row is therefore split over a
// cluster of 8 blocks, one lane of 1024 a thread: each block adds its lanes, the blocks read
// each other's sums through distributed shared memory and add them in the lanes' order, and
// each thread scales the elements it summed, held in registers (device/cluster_rms.cuh).
// Narrower rows, and rows wider than a cluster's registers hold, keep a block a row, four lanes
// a thread: the same tree, from registers too below 2048 columns (the q_norm's 1024 at decode).
#include "kernels/contracts.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device/cluster_rms.cuh"
#include "kernels/cuda/device/common.cuh"

namespace dsv4::kernels::cuda {
namespace {

// Rows at least this wide take a cluster: below it a block's 256 threads load at most four
// elements each, one round trip.
inline constexpr int64_t kClusterMinCols = 2048;

// y[i] = x[i] · inv_rms · w[i] for i = first, first + step, … (loads of a pass before its
// stores, so in place a thread rewrites only what it read).
__device__ void scale_row(const float* src, float* dst, const float* weight, float inv_rms,
                          int64_t n, int64_t first, int64_t step) {
  int64_t i = first;
  for (; i + (kRowUnroll - 1) * step < n; i += kRowUnroll * step) {
    float v[kRowUnroll], w[kRowUnroll];
#pragma unroll
    for (int k = 0; k < kRowUnroll; ++k) {
      v[k] = src[i + k * step];
      w[k] = weight ? weight[i + k * step] : 1.0f;
    }
#pragma unroll
    for (int k = 0; k < kRowUnroll; ++k) dst[i + k * step] = v[k] * inv_rms * w[k];
  }
  for (; i < n; i += step) dst[i] = src[i] * inv_rms * (weight ? weight[i] : 1.0f);
}

// A block a row: rows of up to kPasses · kRmsNormLanes from registers (one round trip), kPasses
// = 0 streaming wider ones (a block a row only takes those past the cluster kernel's rows).
template <int kPasses>
__global__ void __launch_bounds__(kRowThreads)
    rms_norm_kernel(RowMatrix in, RowMatrix out, const float* weight, float eps) {
  const float* src = in.data + blockIdx.x * in.row_stride;
  float* dst = out.data + blockIdx.x * out.row_stride;
  if constexpr (kPasses > 0) {
    const BlockRow<kRowThreads, kPasses> row =
        block_row<kRowThreads, kPasses>(src, in.n_cols, weight);
    row.store_normed(dst, block_inv_rms<kRowThreads>(row, eps));
  } else {
    // Its reduction ends every read of the sum pass, so in place the writes come after them.
    const float inv_rms = row_inv_rms<kRowThreads>(src, in.n_cols, eps);
    scale_row(src, dst, weight, inv_rms, in.n_cols, threadIdx.x, blockDim.x);
  }
}

// A cluster a row (grid [kRmsClusterBlocks, T]): thread g of the cluster owns lane g, whose
// elements it loads once into registers, sums and scales (so in place every element is read and
// written by one thread).
template <int kPerLane>
__global__ void __cluster_dims__(kRmsClusterBlocks, 1, 1) __launch_bounds__(kRmsClusterThreads)
    rms_norm_cluster_kernel(RowMatrix in, RowMatrix out, const float* weight, float eps) {
  const float* src = in.data + blockIdx.y * in.row_stride;
  const ClusterRow<kPerLane> row = cluster_row<kPerLane>(src, in.n_cols, weight);
  row.store_normed(out.data + blockIdx.y * out.row_stride, cluster_inv_rms(row, eps));
  cluster_rms_done();
}

}  // namespace

void rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& y) {
  const auto [in, out, w] = rms_norm_operands(x, weight, y);
  if (in.n_rows == 0) return;
  const bool on_cluster = in.n_cols >= kClusterMinCols && in.n_rows <= kMaxClusterRows &&
                          launch_with_lane_elements(in.n_cols, [&](auto per_lane) {
                            const dim3 grid(kRmsClusterBlocks, static_cast<unsigned>(in.n_rows));
                            rms_norm_cluster_kernel<decltype(per_lane)::value>
                                <<<grid, kRmsClusterThreads, 0, op_stream()>>>(in, out, w, eps);
                          });
  if (!on_cluster) {
    const auto launch = [&](auto kernel) {
      kernel<<<static_cast<unsigned>(in.n_rows), kRowThreads, 0, op_stream()>>>(in, out, w, eps);
    };
    if (in.n_cols <= kRmsNormLanes) {
      launch(rms_norm_kernel<1>);
    } else if (in.n_cols <= 2 * kRmsNormLanes) {
      launch(rms_norm_kernel<2>);
    } else {
      launch(rms_norm_kernel<0>);
    }
  }
  check_launch();
}

}  // namespace dsv4::kernels::cuda

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
//
// rms_norm_fp8 is the same kernels with one more store: a row held in registers is quantized
// from them (device/fp8_quantize.cuh), a group of 128 columns being one warp's (block a row) or
// one block's (cluster) elements. A row streamed through a block runs rms_norm, then the
// quantizer.
#include "kernels/contracts.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device/cluster_rms.cuh"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/device/fp8_quantize.cuh"

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
// kQuantize (kPasses > 0 only) stores the row quantized to q too.
template <int kPasses, bool kQuantize>
__global__ void __launch_bounds__(kRowThreads)
    rms_norm_kernel(RowMatrix in, RowMatrix out, const float* weight, float eps, Fp8Out q) {
  static_assert(kPasses > 0 || !kQuantize, "a streamed row is not held to quantize");
  const float* src = in.data + blockIdx.x * in.row_stride;
  float* dst = out.data + blockIdx.x * out.row_stride;
  if constexpr (kPasses > 0) {
    const BlockRow<kRowThreads, kPasses> row =
        block_row<kRowThreads, kPasses>(src, in.n_cols, weight);
    const float inv_rms = block_inv_rms<kRowThreads>(row, eps);
    row.store_normed(dst, inv_rms);
    if constexpr (kQuantize) {
      store_normed_fp8(row, inv_rms, q.row_codes(blockIdx.x), q.row_scales(blockIdx.x));
    }
  } else {
    // Its reduction ends every read of the sum pass, so in place the writes come after them.
    const float inv_rms = row_inv_rms<kRowThreads>(src, in.n_cols, eps);
    scale_row(src, dst, weight, inv_rms, in.n_cols, threadIdx.x, blockDim.x);
  }
}

// A cluster a row (grid [kRmsClusterBlocks, T]): thread g of the cluster owns lane g, whose
// elements it loads once into registers, sums and scales (so in place every element is read and
// written by one thread); kQuantize stores them quantized to q too.
template <int kPerLane, bool kQuantize>
__global__ void __cluster_dims__(kRmsClusterBlocks, 1, 1) __launch_bounds__(kRmsClusterThreads)
    rms_norm_cluster_kernel(RowMatrix in, RowMatrix out, const float* weight, float eps, Fp8Out q) {
  const float* src = in.data + blockIdx.y * in.row_stride;
  const ClusterRow<kPerLane> row = cluster_row<kPerLane>(src, in.n_cols, weight);
  const float inv_rms = cluster_inv_rms(row, eps);
  row.store_normed(out.data + blockIdx.y * out.row_stride, inv_rms);
  if constexpr (kQuantize) {
    store_normed_fp8(row, inv_rms, q.row_codes(blockIdx.y), q.row_scales(blockIdx.y));
  }
  cluster_rms_done();
}

// rms_norm, and with kQuantize its rows quantized to q; false (launching nothing) where
// kQuantize and the row would stream through a block, which holds no row to quantize.
template <bool kQuantize>
bool launch_rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& y,
                     Fp8Out q) {
  const auto [in, out, w] = rms_norm_operands(x, weight, y);
  if (in.n_rows == 0) return true;
  const bool on_cluster = in.n_cols >= kClusterMinCols && in.n_rows <= kMaxClusterRows &&
                          launch_with_lane_elements(in.n_cols, [&](auto per_lane) {
                            const dim3 grid(kRmsClusterBlocks, static_cast<unsigned>(in.n_rows));
                            rms_norm_cluster_kernel<decltype(per_lane)::value, kQuantize>
                                <<<grid, kRmsClusterThreads, 0, op_stream()>>>(in, out, w, eps, q);
                          });
  if (!on_cluster) {
    const auto launch = [&](auto kernel) {
      kernel<<<static_cast<unsigned>(in.n_rows), kRowThreads, 0, op_stream()>>>(in, out, w, eps, q);
    };
    if (in.n_cols <= kRmsNormLanes) {
      launch(rms_norm_kernel<1, kQuantize>);
    } else if (in.n_cols <= 2 * kRmsNormLanes) {
      launch(rms_norm_kernel<2, kQuantize>);
    } else if constexpr (!kQuantize) {
      launch(rms_norm_kernel<0, false>);
    } else {
      return false;
    }
  }
  check_launch();
  return true;
}

}  // namespace

void rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& y) {
  launch_rms_norm<false>(x, weight, eps, y, Fp8Out{});
}

void rms_norm_fp8(const TensorView& x, const TensorView& weight, float eps, const TensorView& y,
                  const Fp8Activation& y_fp8) {
  if (!launch_rms_norm<true>(x, weight, eps, y, fp8_out(y, y_fp8))) {
    cuda::rms_norm(x, weight, eps, y);
    cuda::quantize_activation_fp8(y, y_fp8);
  }
}

}  // namespace dsv4::kernels::cuda

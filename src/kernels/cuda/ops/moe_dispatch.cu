// The data movement around the routed experts on CUDA, unfused (kernels/cpu/moe_dispatch.cpp is
// the reference): gather rows by slot, the dense experts' grouped GEMM (its kernel in
// gemm/dense/grouped_linear.cu), and the combine.
// gather and combine are bit-identical to the CPU: the combine sums each token's K expert rows
// in grouped-row order, as the CPU's loop does, with rounded products and sums.
//
// Dimension letters: T tokens, K experts per token, R = T·K grouped rows, D model width,
// G experts, N output features.
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemm/dense/kernels.h"

namespace dsv4::kernels::cuda {
namespace {

__global__ void moe_gather_kernel(RowMatrix in, const int32_t* order, int64_t k, RowMatrix out) {
  const float* src = in.data + (order[blockIdx.x] / k) * in.row_stride;
  float* dst = out.data + blockIdx.x * out.row_stride;
  for (int64_t i = threadIdx.x; i < in.n_cols; i += blockDim.x) dst[i] = src[i];
}

// One block per token t. Dynamic shared memory: 2·K ints, the token's grouped rows in increasing
// order and the slot k each came from.
__global__ void moe_combine_kernel(RowMatrix rows, const int32_t* order, RowMatrix weights,
                                   RowMatrix out) {
  extern __shared__ int32_t smem_rows[];
  const int64_t t = blockIdx.x, k = weights.n_cols;
  int32_t* row_of = smem_rows;       // [K] by slot
  int32_t* slot_of = smem_rows + k;  // [K] sorted by row
  for (int64_t r = threadIdx.x; r < rows.n_rows; r += blockDim.x) {
    if (order[r] / k == t) row_of[order[r] % k] = static_cast<int32_t>(r);
  }
  __syncthreads();
  if (threadIdx.x == 0) {  // insertion sort of K (row, slot) pairs by row
    for (int32_t i = 0; i < k; ++i) {
      int32_t j = i;
      while (j > 0 && row_of[slot_of[j - 1]] > row_of[i]) {
        slot_of[j] = slot_of[j - 1];
        --j;
      }
      slot_of[j] = i;
    }
  }
  __syncthreads();
  const float* w = weights.data + t * weights.row_stride;
  for (int64_t i = threadIdx.x; i < out.n_cols; i += blockDim.x) {
    float acc = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const int32_t slot = slot_of[j];
      acc = __fadd_rn(acc, __fmul_rn(rows.data[row_of[slot] * rows.row_stride + i], w[slot]));
    }
    out.data[t * out.row_stride + i] = acc;
  }
}

}  // namespace

void moe_gather(const TensorView& x, const TensorView& order, const TensorView& y) {
  const RowMatrix in = as_rows(x, "moe_gather x");
  const RowMatrix out = as_rows(y, "moe_gather y");
  DSV4_CHECK(order.dtype == DType::kI32 && order.is_contiguous() && order.numel() == out.n_rows &&
                 in.n_cols == out.n_cols && in.n_rows > 0 && out.n_rows % in.n_rows == 0,
             "moe_gather: y must be [T·K, D] with order i32 [T·K]");
  if (out.n_rows == 0) return;
  moe_gather_kernel<<<static_cast<unsigned>(out.n_rows), kRowThreads, 0, op_stream()>>>(
      in, order.data_as<const int32_t>(), out.n_rows / in.n_rows, out);
  check_launch();
}

void moe_combine(const TensorView& expert_out, const TensorView& order, const TensorView& weights,
                 const TensorView& out) {
  const RowMatrix rows = as_rows(expert_out, "moe_combine expert_out");
  const RowMatrix w = as_rows(weights, "moe_combine weights");
  const RowMatrix dst = as_rows(out, "moe_combine out");
  DSV4_CHECK(order.dtype == DType::kI32 && order.is_contiguous() && order.numel() == rows.n_rows &&
                 rows.n_rows == dst.n_rows * w.n_cols && w.n_rows == dst.n_rows &&
                 rows.n_cols == dst.n_cols,
             "moe_combine: expert_out [T·K, D], weights [T, K], out [T, D]");
  if (dst.n_rows == 0) return;
  const size_t smem_bytes = 2 * sizeof(int32_t) * static_cast<size_t>(w.n_cols);
  moe_combine_kernel<<<static_cast<unsigned>(dst.n_rows), kRowThreads, smem_bytes, op_stream()>>>(
      rows, order.data_as<const int32_t>(), w, dst);
  check_launch();
}

void grouped_linear(const TensorView& x, const TensorView& w, const TensorView& offsets,
                    const TensorView& y) {
  const RowMatrix in = as_rows(x, "grouped_linear x");
  const RowMatrix out = as_rows(y, "grouped_linear y");
  DSV4_CHECK(w.dtype == DType::kF32 && w.rank() == 3 && w.is_contiguous() &&
                 w.size(2) == in.n_cols && w.size(1) == out.n_cols && out.n_rows == in.n_rows,
             "grouped_linear: w must be f32 [G, N, K] for x [R, K], y [R, N]");
  DSV4_CHECK(offsets.dtype == DType::kI32 && offsets.is_contiguous() &&
                 offsets.numel() == w.size(0) + 1,
             "grouped_linear: offsets must be i32 [G+1]");
  launch_grouped_linear(in, w.data_as<const float>(), offsets.data_as<const int32_t>(), w.size(0),
                        out);
}

}  // namespace dsv4::kernels::cuda

// The small row-wise ops of the dense section on CUDA: softmax (one block per row, max and sum
// reduced over the block, the sum in double as on the CPU), the clamped SwiGLU and add (one
// thread per element), and the row lookups (embedding by index, gather_rows by address: one
// block per row, bytes of any dtype) and copy_blocks (one block a copy). add, embedding,
// gather_rows and copy_blocks are bit-identical to the CPU; softmax and swiglu differ by expf's
// last ulp. swiglu_fp8 quantizes the SwiGLU's output as it makes it: a warp a group of 128
// columns (quantize_activation_fp8's layout, device/fp8_quantize.cuh), the same swiglu() as
// swiglu's kernel, so its bytes are swiglu's, then the quantizer's.
//
// Dimension letters: T tokens (rows), N columns, F expert width, D model width, V table rows.
#include <cmath>

#include "kernels/contracts.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/device/fp8_quantize.cuh"
#include "kernels/cuda/device/swiglu.cuh"

namespace dsv4::kernels::cuda {
namespace {

__global__ void softmax_kernel(RowMatrix in, RowMatrix out) {
  const float* src = in.data + blockIdx.x * in.row_stride;
  float* dst = out.data + blockIdx.x * out.row_stride;
  float max = -INFINITY;
  for (int64_t i = threadIdx.x; i < in.n_cols; i += blockDim.x) max = fmaxf(max, src[i]);
  max = block_reduce(max, MaxOp{});
  double sum = 0.0;
  for (int64_t i = threadIdx.x; i < in.n_cols; i += blockDim.x) {
    dst[i] = expf(src[i] - max);  // y may alias x: each thread rewrites only its own elements
    sum += dst[i];
  }
  const float inv_sum = static_cast<float>(1.0 / block_reduce(sum, SumOp{}));
  for (int64_t i = threadIdx.x; i < in.n_cols; i += blockDim.x) dst[i] *= inv_sum;
}

__global__ void swiglu_kernel(RowMatrix in, RowMatrix out, float limit) {
  const int64_t f = out.n_cols;
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= out.n_rows * f) return;
  const int64_t r = i / f, c = i % f;
  out.data[r * out.row_stride + c] =
      swiglu(in.data[r * in.row_stride + c], in.data[r * in.row_stride + f + c], limit);
}

constexpr int kSwigluFp8Warps = 8;  // a block: 8 groups of 128 columns, a warp each

// Warp w of block b: group (row, j) = divmod(8 b + w, Fb), Fb = ceil(F/128) groups of a row;
// lane l computes columns 128 j + l + 32 i, i < 4, stores them and their codes.
__global__ void __launch_bounds__(kSwigluFp8Warps * 32)
    swiglu_fp8_kernel(RowMatrix in, RowMatrix out, float limit, Fp8Out q, int64_t n_groups) {
  const int64_t group = int64_t{blockIdx.x} * kSwigluFp8Warps + threadIdx.x / 32;
  if (group >= out.n_rows * n_groups) return;
  const int64_t f = out.n_cols, r = group / n_groups, j = group % n_groups, k0 = j * kFp8Group;
  const float* gate = in.data + r * in.row_stride;
  float v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t c = k0 + threadIdx.x % 32 + 32 * i;
    v[i] = c < f ? swiglu(gate[c], gate[f + c], limit) : 0.0f;
    if (c < f) out.data[r * out.row_stride + c] = v[i];
  }
  fp8_store_warp_group(v, k0, f, q.row_codes(r), q.row_scales(r) + j);
}

__global__ void add_kernel(const float* a, const float* b, float* y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = a[i] + b[i];
}

// One row's bytes, by the block: 16 bytes a load where the rows allow (a V4 row, 8 KB of bf16,
// takes 28 µs byte by byte: ncu, H200), else bytes.
__device__ void copy_row(const char* src, char* dst, int64_t row_bytes) {
  if (row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
    const auto* src16 = reinterpret_cast<const uint4*>(src);
    auto* dst16 = reinterpret_cast<uint4*>(dst);
    for (int64_t i = threadIdx.x; i < row_bytes / 16; i += blockDim.x) dst16[i] = src16[i];
    return;
  }
  for (int64_t i = threadIdx.x; i < row_bytes; i += blockDim.x) dst[i] = src[i];
}

__global__ void embedding_kernel(const char* table, int64_t n_table_rows, const int64_t* ids,
                                 int64_t row_bytes, char* y) {
  const int64_t id = ids[blockIdx.x];
  if (id < 0 || id >= n_table_rows) __trap();  // the caller validated ids: this is a bug
  copy_row(table + id * row_bytes, y + blockIdx.x * row_bytes, row_bytes);
}

__global__ void gather_rows_kernel(GatherRowsOperands o) {
  copy_row(reinterpret_cast<const char*>(o.rows[blockIdx.x]), o.y + blockIdx.x * o.row_bytes,
           o.row_bytes);
}

__global__ void copy_blocks_kernel(CopyBlocksOperands o) {
  copy_row(reinterpret_cast<const char*>(o.sources[blockIdx.x]),
           reinterpret_cast<char*>(o.destinations[blockIdx.x]), o.bytes[blockIdx.x]);
}

}  // namespace

void softmax(const TensorView& x, const TensorView& y) {
  const RowMatrix in = as_rows(x, "softmax x");
  const RowMatrix out = as_rows(y, "softmax y");
  DSV4_CHECK(in.n_rows == out.n_rows && in.n_cols == out.n_cols, "softmax: x and y differ");
  if (in.n_rows == 0) return;
  softmax_kernel<<<static_cast<unsigned>(in.n_rows), kRowThreads, 0, op_stream()>>>(in, out);
  check_launch();
}

void swiglu(const TensorView& gate_up, float limit, const TensorView& out) {
  const auto [in, dst] = swiglu_operands(gate_up, out);
  const int64_t n = dst.n_rows * dst.n_cols;
  if (n == 0) return;
  swiglu_kernel<<<element_blocks(n), kElementThreads, 0, op_stream()>>>(in, dst, limit);
  check_launch();
}

void swiglu_fp8(const TensorView& gate_up, float limit, const TensorView& out,
                const Fp8Activation& out_fp8) {
  const auto [in, dst] = swiglu_operands(gate_up, out);
  const Fp8Out q = fp8_out(out, out_fp8);
  const int64_t n_groups = fp8_groups(dst.n_cols), n_units = dst.n_rows * n_groups;
  if (n_units == 0) return;
  swiglu_fp8_kernel<<<static_cast<unsigned>(ceil_div(n_units, kSwigluFp8Warps)),
                      kSwigluFp8Warps * 32, 0, op_stream()>>>(in, dst, limit, q, n_groups);
  check_launch();
}

void add(const TensorView& a, const TensorView& b, const TensorView& y) {
  check_add(a, b, y);
  const int64_t n = y.numel();
  if (n == 0) return;
  add_kernel<<<element_blocks(n), kElementThreads, 0, op_stream()>>>(
      a.data_as<const float>(), b.data_as<const float>(), y.data_as<float>(), n);
  check_launch();
}

void embedding(const TensorView& table, const TensorView& ids, const TensorView& y) {
  check_embedding(table, ids, y);
  if (y.size(0) == 0) return;
  const auto row_bytes = static_cast<int64_t>(table.size(1) * dtype_size(table.dtype));
  embedding_kernel<<<static_cast<unsigned>(y.size(0)), kRowThreads, 0, op_stream()>>>(
      static_cast<const char*>(table.data), table.size(0), ids.data_as<const int64_t>(), row_bytes,
      static_cast<char*>(y.data));
  check_launch();
}

void gather_rows(const TensorView& rows, const TensorView& y) {
  const GatherRowsOperands o = gather_rows_operands(rows, y);
  if (o.n_rows == 0) return;
  gather_rows_kernel<<<static_cast<unsigned>(o.n_rows), kRowThreads, 0, op_stream()>>>(o);
  check_launch();
}

void copy_blocks(const TensorView& sources, const TensorView& destinations,
                 const TensorView& bytes) {
  const CopyBlocksOperands o = copy_blocks_operands(sources, destinations, bytes);
  if (o.n_blocks == 0) return;
  copy_blocks_kernel<<<static_cast<unsigned>(o.n_blocks), kRowThreads, 0, op_stream()>>>(o);
  check_launch();
}

}  // namespace dsv4::kernels::cuda

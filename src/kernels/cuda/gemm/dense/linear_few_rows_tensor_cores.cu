// cuda::linear on the tensor cores for a decode step of a batch: y[T, N] = x[T, K] · w[N, K]ᵀ with
// 2-16 rows of f32 x and a bf16 weight, exact to f32 like the many-rows kernel
// (linear_tensor_cores.cu; x split into three bf16 by bf16_split.cuh, every product exact).
//
// Why. At a few rows the weight's bytes are the cost, and the CUDA-core kernel
// (linear_cuda_cores.cu) pays each weight a multiply-add per token plus the token's load: at 8
// tokens it is issue-bound and streams a V4-Flash decode step's projections at ~1 TB/s (ncu,
// H100). One m16n8k16 MMA takes 16 weight rows × 16 K × 8 tokens, so here a weight
// costs 3/128 of an MMA and the split of x, shared by 16 rows.
//
// Shape. The weight is the MMA's A (16 output rows), the tokens its B (8 columns, a chunk; the
// grid's y walks the chunks). A CTA owns one 16-row m-tile and its warps split K into equal runs
// of 32-element steps; lane (g, c) = (lane / 4, lane % 4) loads, per step, 16 bytes of rows g
// and g + 8 at K offset 8c and 8 x values of token g at the same offset, so the four lanes of a
// row read 64 contiguous bytes. Each lane's 8 K elements feed two MMAs: elements 8c + 0..3 as
// the first one's k pairs (2c, 2c + 1) and (2c + 8, 2c + 9), 8c + 4..7 the second's. A dot
// product does not care in which order it visits K, and A and B take the same order. Steps come
// in batches of kBatch whose loads are all in flight together. Each step's six MMAs (two K
// halves × three parts of x, smallest first) go into a fresh partial sum added to the lane's in
// f32, as in the many-rows kernel (the tensor cores' accumulation is not round-to-nearest). The
// warps' sums meet in shared memory in warp order: deterministic. An FP8 weight (e4m3 with
// power-of-two block scales) loads 8 bytes where bf16 loads 16 and is decoded to the same bf16
// (device/fp8_decode.cuh): the same MMAs, so the same bits, from half the bytes.
//
// Dimension letters: T tokens (rows of x and y), N output features (rows of w), K input features.
#include <algorithm>

#include "kernels/cuda/device/bf16_split.cuh"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/device/fp8_decode.cuh"
#include "kernels/cuda/device/mma_sync.cuh"
#include "kernels/cuda/gemm/dense/config.h"
#include "kernels/cuda/gemm/dense/kernels.h"
#include "kernels/cuda/stream.h"

namespace dsv4::kernels::cuda {
namespace {

constexpr int kRows = kFewRowsTcRows;      // output rows of a CTA (the MMA's M)
constexpr int kTokens = kFewRowsTcTokens;  // tokens of a chunk (the MMA's N)
constexpr int kStepK = kFewRowsTcStepK;    // K of a warp step: 4 lanes × 8
constexpr int kBatch = 4;                  // steps whose loads are in flight together

using Operands = TensorCoreOperands;

// A weight row as 8 bf16 at a time: of bf16 bits, or decoded from e4m3 codes and the row's
// block scales. `col` is a multiple of 8.
struct Bf16Row {
  const uint16_t* values;
  __device__ uint4 load8(int64_t col) const { return load_weights_once(values + col); }
};
struct Fp8Row {
  const uint8_t* codes;
  const float* scales;  // the row's block row
  __device__ uint4 load8(int64_t col) const {
    uint2 v;
    asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];\n"
                 : "=r"(v.x), "=r"(v.y)
                 : "l"(codes + col));
    return e4m3x8_as_bf16(v, __ldg(scales + col / format::kFp8WeightBlock));
  }
};
__device__ __forceinline__ Bf16Row weight_row(const Operands& o, Bf16Row, int64_t r) {
  return {o.w + r * o.w_stride};
}
__device__ __forceinline__ Fp8Row weight_row(const Operands& o, Fp8Row, int64_t r) {
  return {o.w8 + r * o.w_stride, o.w_scales + r / format::kFp8WeightBlock * o.scale_cols};
}

// One step's operands for lane (g, c): 8 weights of rows g and g + 8, 8 values of token g.
struct Step {
  uint4 lo, hi;
  float4 x0, x1;
};

// acc (C fragment: rows g, g + 8 × tokens 2c, 2c + 1) += the step's 16 rows × 8 tokens × 32 K.
__device__ __forceinline__ void mma_step(const Step& s, float (&acc)[4]) {
  float v[8] = {s.x0.x, s.x0.y, s.x0.z, s.x0.w, s.x1.x, s.x1.y, s.x1.z, s.x1.w};
  uint32_t parts[3][4];  // [hi, mid, lo][pair]: the pairs (8c, +1), (+2, +3), (+4, +5), (+6, +7)
#pragma unroll
  for (int part = 0; part < 3; ++part) {
#pragma unroll
    for (int p = 0; p < 4; ++p) parts[part][p] = split_pair(v[2 * p], v[2 * p + 1]);
  }
  const uint32_t a0[4] = {s.lo.x, s.hi.x, s.lo.y, s.hi.y};
  const uint32_t a1[4] = {s.lo.z, s.hi.z, s.lo.w, s.hi.w};
  float step_sum[4] = {};
#pragma unroll
  for (int part = 2; part >= 0; --part) {
    mma_bf16_16816(step_sum, a0, parts[part][0], parts[part][1]);
    mma_bf16_16816(step_sum, a1, parts[part][2], parts[part][3]);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) acc[i] += step_sum[i];
}

// kWarps 8 or 16: 16 warps an SM at ≤ 128 registers a thread.
template <int kWarps, typename Row>
__global__ void __launch_bounds__(32 * kWarps, 16 / kWarps)
    linear_few_rows_tensor_cores_kernel(Operands o) {
  __shared__ float partial[kWarps][4][32];  // [warp][C register][lane]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int n0 = blockIdx.x * kRows, t0 = blockIdx.y * kTokens;
  const int n_steps = o.k / kStepK;
  const int begin = warp * n_steps / kWarps, end = (warp + 1) * n_steps / kWarps;
  // Rows past N read the last row and tokens past T the chunk's first; neither is stored.
  const Row w_lo = weight_row(o, Row{}, std::min(n0 + g, o.n - 1));
  const Row w_hi = weight_row(o, Row{}, std::min(n0 + g + 8, o.n - 1));
  const int token = t0 + g < o.t ? t0 + g : t0;
  const float* x_row = o.x + int64_t{token} * o.x_stride + int64_t{n0 / o.group_rows} * o.k + 8 * c;

  float acc[4] = {};
  for (int s0 = begin; s0 < end; s0 += kBatch) {
    Step batch[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int s = std::min(s0 + i, end - 1);  // past the run: a repeat, not summed
      batch[i].lo = w_lo.load8(int64_t{s} * kStepK + 8 * c);
      batch[i].hi = w_hi.load8(int64_t{s} * kStepK + 8 * c);
      batch[i].x0 = __ldg(reinterpret_cast<const float4*>(x_row + s * kStepK));
      batch[i].x1 = __ldg(reinterpret_cast<const float4*>(x_row + s * kStepK + 4));
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      if (s0 + i < end) mma_step(batch[i], acc);
    }
  }

#pragma unroll
  for (int r = 0; r < 4; ++r) partial[warp][r][lane] = acc[r];
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int r = 0; r < 4; ++r) {  // r: (row g, g + 8) × (token 2c, 2c + 1)
    const int t = t0 + 2 * c + r % 2, n = n0 + g + 8 * (r / 2);
    if (t >= o.t || n >= o.n) continue;
    float sum = partial[0][r][lane];
    for (int w = 1; w < kWarps; ++w) sum += partial[w][r][lane];
    o.y[int64_t{t} * o.y_stride + n] = sum;
  }
}

template <int kWarps, typename Row>
void launch(const Operands& o) {
  const dim3 grid(static_cast<unsigned>(ceil_div(o.n, kRows)),
                  static_cast<unsigned>(ceil_div(o.t, kTokens)));
  linear_few_rows_tensor_cores_kernel<kWarps, Row><<<grid, 32 * kWarps, 0, op_stream()>>>(o);
}

template <typename Row>
void launch(const Operands& o, int warps) {
  warps == 16 ? launch<16, Row>(o) : launch<8, Row>(o);
}

}  // namespace

void linear_few_rows_tensor_cores(const LinearOperands& o, int64_t n_groups, int warps) {
  const Operands operands = tensor_core_operands(o, n_groups);
  if (o.w.dtype == DType::kF8E4M3) {
    launch<Fp8Row>(operands, warps);
  } else {
    launch<Bf16Row>(operands, warps);
  }
  check_launch();
}

}  // namespace dsv4::kernels::cuda

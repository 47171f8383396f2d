// cuda::linear on the tensor cores, exact to f32, for calls with many rows (a prefill's
// projections): y[T, N] = x[T, K] · w[N, K]ᵀ with f32 x and y and a bf16 weight.
//
// Why it is exact. The forward must match transformers' fp32 reference to 1e-4 (TF32 alone costs
// ~1e-3), and tensor cores multiply bf16. So each x is split into three bf16 that sum to it
// exactly, x = hi + mid + lo (bf16_split.cuh), and the weight is a bf16 already (copy_weights
// keeps a linear's weight in bf16 on a GPU only when every value is one). Each product hi·w, mid·w,
// lo·w of two bf16 is exact in the f32 accumulator, so the result differs from an f32 GEMM only in
// its summation order, like the CUDA-core kernels (linear_cuda_cores.cu). Three MMAs per product
// cost 3× the tensor work; measured on an H100 (docs/bench.md, "Dense linears"), it is still
// 5.5-8.5× the CUDA-core SGEMM it replaces for these calls and 2.1-2.35× cuBLAS's f32 SGEMM at
// 2048 rows.
//
// Shape. A block computes a 128-token × 128-output tile of y: 8 warps as 2 (tokens) × 4
// (outputs), each 64 × 32 with m16n8k16 MMAs, over K in steps of 32. The weight tile comes by
// cp.async into a 3-stage ring; the x tile through registers, loaded one step ahead, split and
// stored as three bf16 tiles (two buffers), so one barrier per step orders everything.
// Shared rows are 40 bf16 (80 bytes), so the 8 rows an ldmatrix reads fall in 8 bank groups.
// Block-diagonal calls (G groups side by side) take the group from blockIdx.z.
// An FP8 weight (e4m3 with power-of-two block scales) is decoded to its bf16 on the way into
// shared memory, through registers instead of cp.async: the same bf16 tile, so the same bits.
//
// Dimension letters: T tokens (rows of x and y), N output features (rows of w), K input features.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/bf16_split.cuh"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/device/fp8_decode.cuh"
#include "kernels/cuda/device/mma_sync.cuh"
#include "kernels/cuda/gemm/dense/config.h"
#include "kernels/cuda/gemm/dense/kernels.h"
#include "kernels/cuda/stream.h"

namespace dsv4::kernels::cuda {
namespace {

constexpr int kTileT = kTensorCoreTileT;  // tokens per block
constexpr int kTileN = kTensorCoreTileN;  // outputs per block
constexpr int kStepK = 32;                // K per step
constexpr int kWarpsT = 2, kWarpsN = 4;
constexpr int kWarpT = kTileT / kWarpsT, kWarpN = kTileN / kWarpsN;  // 64 × 32 a warp
constexpr int kThreads = 32 * kWarpsT * kWarpsN;
constexpr int kWeightStages = 3;
constexpr int kRowElems = kStepK + 8;                     // bf16 a shared row: 80 bytes
constexpr int kSplits = 3;                                // x = hi + mid + lo
constexpr int kXQuads = kTileT * kStepK / 4 / kThreads;   // float4 of x a thread stages a step
constexpr int kWChunks = kTileN * kStepK / 8 / kThreads;  // 16-byte weight copies a thread

struct Smem {
  uint16_t x[2][kSplits][kTileT][kRowElems];
  uint16_t w[kWeightStages][kTileN][kRowElems];
};

// A block of group g reads x from column g·k, w from row g·group_rows and writes y from column
// g·group_rows.
using Operands = TensorCoreOperands;

// Thread i stages x quads i + kThreads·j: row q / 8 of the tile, columns 4 (q % 8) .. + 3.
__device__ __forceinline__ int quad_row(int j) { return (threadIdx.x + kThreads * j) / 8; }
__device__ __forceinline__ int quad_col(int j) { return (threadIdx.x + kThreads * j) % 8 * 4; }

// x[t0 + row, k0 + col .. + 3] of this thread's quads, zero past T and K. kVec: 16-byte loads
// (rows aligned, K a multiple of 4).
template <bool kVec>
__device__ __forceinline__ void load_x(const Operands& o, int t0, int k0, float4 (&q)[kXQuads]) {
#pragma unroll
  for (int j = 0; j < kXQuads; ++j) {
    const int row = t0 + quad_row(j), col = k0 + quad_col(j);
    const float* src = o.x + int64_t{row} * o.x_stride + col;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (row < o.t) {
      if constexpr (kVec) {
        if (col < o.k) {
          const float4 f = __ldg(reinterpret_cast<const float4*>(src));
          v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
        }
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = col + e < o.k ? __ldg(src + e) : 0.0f;
      }
    }
    q[j] = make_float4(v[0], v[1], v[2], v[3]);
  }
}

// The quads as hi, mid and lo bf16 tiles of buffer `buf`.
__device__ __forceinline__ void store_x_split(Smem& s, int buf, float4 (&q)[kXQuads]) {
#pragma unroll
  for (int j = 0; j < kXQuads; ++j) {
    float v[4] = {q[j].x, q[j].y, q[j].z, q[j].w};
#pragma unroll
    for (int part = 0; part < kSplits; ++part) {
      const uint32_t cols01 = split_pair(v[0], v[1]), cols23 = split_pair(v[2], v[3]);
      *reinterpret_cast<uint2*>(&s.x[buf][part][quad_row(j)][quad_col(j)]) =
          make_uint2(cols01, cols23);
    }
  }
}

// The weight rows n0 .. n0 + 127, columns k0 .. k0 + 31 into ring slot `slot`: thread i copies
// chunks i + kThreads·j (row c / 4, 8 columns (c % 4)·8 on), zeros past N and K.
// kFp8: rows from the codes and scales of the group starting at matrix row first_row, decoded
// and stored by this thread (visible to the others after the barrier before their use).
template <bool kFp8>
__device__ __forceinline__ void copy_w(Smem& s, const Operands& o, int64_t first_row, int n0,
                                       int k0, int slot) {
#pragma unroll
  for (int j = 0; j < kWChunks; ++j) {
    const int c = threadIdx.x + kThreads * j, row = c / 4, col = c % 4 * 8;
    const bool valid = n0 + row < o.group_rows && k0 + col < o.k;
    if constexpr (kFp8) {
      uint4 v = make_uint4(0, 0, 0, 0);
      if (valid) {
        const int64_t r = first_row + n0 + row;
        const uint2 codes = __ldg(reinterpret_cast<const uint2*>(o.w8 + r * o.w_stride + k0 + col));
        const float scale = __ldg(o.w_scales + r / format::kFp8WeightBlock * o.scale_cols +
                                  (k0 + col) / format::kFp8WeightBlock);
        v = e4m3x8_as_bf16(codes, scale);
      }
      *reinterpret_cast<uint4*>(&s.w[slot][row][col]) = v;
    } else {
      const uint16_t* src = valid ? o.w + int64_t{n0 + row} * o.w_stride + k0 + col : o.w;
      cp_async16(&s.w[slot][row][col], src, valid);
    }
  }
  cp_async_commit();  // an empty group for kFp8: every step counts one
}

// acc += this warp's 64 × 32 patch of x-buffer `buf` times weight slot `slot` over one step.
// The step's MMAs go into a fresh partial sum, added to acc by an f32 add: the tensor cores'
// accumulation is not round-to-nearest, and its error, which grows with the MMAs an accumulator
// takes, then stays relative to one step's sum (on an H100, every MMA into acc gives a row error
// of 9e-6 at K = 8192). The parts go smallest first.
__device__ __forceinline__ void mma_step(const Smem& s, int buf, int slot, int warp_t, int warp_n,
                                         float (&acc)[4][4][4]) {
  const int lane = threadIdx.x % 32, q = lane / 8, r = lane % 8;
  uint32_t b[kStepK / 16][4][2];
#pragma unroll
  for (int kk = 0; kk < kStepK / 16; ++kk) {
#pragma unroll
    for (int p = 0; p < 2; ++p) {  // matrices: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, ...)
      uint32_t m[4];
      ldmatrix_x4(m, &s.w[slot][warp_n * kWarpN + p * 16 + q / 2 * 8 + r][16 * kk + q % 2 * 8]);
      b[kk][2 * p][0] = m[0], b[kk][2 * p][1] = m[1];
      b[kk][2 * p + 1][0] = m[2], b[kk][2 * p + 1][1] = m[3];
    }
  }
#pragma unroll
  for (int mt = 0; mt < 4; ++mt) {
    float step_sum[4][4] = {};
#pragma unroll
    for (int part = kSplits - 1; part >= 0; --part) {
#pragma unroll
      for (int kk = 0; kk < kStepK / 16; ++kk) {  // matrices: (rows 0-7, k 0-7), (8-15, 0-7), ...
        uint32_t a[4];
        ldmatrix_x4(
            a, &s.x[buf][part][warp_t * kWarpT + mt * 16 + q % 2 * 8 + r][16 * kk + q / 2 * 8]);
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) mma_bf16_16816(step_sum[nt], a, b[kk][nt][0], b[kk][nt][1]);
      }
    }
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] += step_sum[nt][i];
    }
  }
}

template <bool kVecX, bool kFp8>
__global__ void __launch_bounds__(kThreads, 2) linear_tensor_cores_kernel(Operands o) {
  extern __shared__ uint4 smem_words[];
  Smem& s = *reinterpret_cast<Smem*>(smem_words);
  const int g = blockIdx.z;
  const int64_t first_row = int64_t{g} * o.group_rows;  // kFp8 indexes the matrix's rows
  o.x += int64_t{g} * o.k;
  if constexpr (!kFp8) o.w += first_row * o.w_stride;
  o.y += int64_t{g} * o.group_rows;
  const int t0 = blockIdx.y * kTileT, n0 = blockIdx.x * kTileN;
  const int warp = threadIdx.x / 32, warp_t = warp / kWarpsN, warp_n = warp % kWarpsN;
  const int n_steps = (o.k + kStepK - 1) / kStepK;

  for (int st = 0; st < kWeightStages - 1; ++st) {
    if (st < n_steps) {
      copy_w<kFp8>(s, o, first_row, n0, st * kStepK, st);
    } else {
      cp_async_commit();  // every step counts one group
    }
  }
  float4 xq[kXQuads];
  load_x<kVecX>(o, t0, 0, xq);
  store_x_split(s, 0, xq);
  if (n_steps > 1) load_x<kVecX>(o, t0, kStepK, xq);

  float acc[4][4][4] = {};
  for (int step = 0; step < n_steps; ++step) {
    // This step's weights (this thread's copies) have landed; after the barrier everyone's
    // have, its x buffer is written, and the slot and buffer of the step before are free.
    cp_async_wait<kWeightStages - 2>();
    __syncthreads();
    const int ahead = step + kWeightStages - 1;
    if (ahead < n_steps) {
      copy_w<kFp8>(s, o, first_row, n0, ahead * kStepK, ahead % kWeightStages);
    } else {
      cp_async_commit();
    }
    mma_step(s, step % 2, step % kWeightStages, warp_t, warp_n, acc);
    if (step + 1 < n_steps) {
      store_x_split(s, (step + 1) % 2, xq);
      if (step + 2 < n_steps) load_x<kVecX>(o, t0, (step + 2) * kStepK, xq);
    }
  }
  cp_async_wait<0>();

  // Fragment (mt, nt): c0, c1 at token g, outputs 2t, 2t + 1; c2, c3 at token g + 8.
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int mt = 0; mt < 4; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int token = t0 + warp_t * kWarpT + mt * 16 + half * 8 + lane / 4;
      if (token >= o.t) continue;
      float* y_row = o.y + int64_t{token} * o.y_stride;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int n = n0 + warp_n * kWarpN + nt * 8 + lane % 4 * 2;
        if (n < o.group_rows) y_row[n] = acc[mt][nt][2 * half];
        if (n + 1 < o.group_rows) y_row[n + 1] = acc[mt][nt][2 * half + 1];
      }
    }
  }
}

template <bool kVecX, bool kFp8>
void launch(const Operands& o, dim3 grid) {
  [[maybe_unused]] static const bool allowed =
      allow_dynamic_smem(linear_tensor_cores_kernel<kVecX, kFp8>, static_cast<int>(sizeof(Smem)));
  linear_tensor_cores_kernel<kVecX, kFp8><<<grid, kThreads, sizeof(Smem), op_stream()>>>(o);
}

template <bool kFp8>
void launch(const Operands& o, dim3 grid, bool vec_x) {
  vec_x ? launch<true, kFp8>(o, grid) : launch<false, kFp8>(o, grid);
}

dim3 grid_of(const LinearOperands& o, int64_t n_groups) {
  return dim3(static_cast<unsigned>(ceil_div(o.w.n_rows / n_groups, kTileN)),
              static_cast<unsigned>(ceil_div(o.x.n_rows, kTileT)), static_cast<unsigned>(n_groups));
}

}  // namespace

TensorCoreOperands tensor_core_operands(const LinearOperands& o, int64_t n_groups) {
  const bool fp8 = o.w.dtype == DType::kF8E4M3;
  return {o.x.data,
          fp8 ? nullptr : static_cast<const uint16_t*>(o.w.data),
          o.y.data,
          o.x.row_stride,
          o.w.row_stride,
          o.y.row_stride,
          static_cast<int>(o.x.n_rows),
          static_cast<int>(o.w.n_rows),
          static_cast<int>(o.w.n_cols),
          static_cast<int>(o.w.n_rows / n_groups),
          fp8 ? static_cast<const uint8_t*>(o.w.data) : nullptr,
          o.w.block_scales,
          o.w.scale_cols};
}

void linear_tensor_cores(const LinearOperands& o, int64_t n_groups) {
  const Operands operands = tensor_core_operands(o, n_groups);
  const bool vec_x = o.x.row_stride % 4 == 0 && o.w.n_cols % 4 == 0 &&
                     reinterpret_cast<uintptr_t>(o.x.data) % 16 == 0;
  const dim3 grid = grid_of(o, n_groups);
  if (o.w.dtype == DType::kF8E4M3) {
    launch<true>(operands, grid, vec_x);
  } else {
    launch<false>(operands, grid, vec_x);
  }
  check_launch();
}

}  // namespace dsv4::kernels::cuda

// The grouped path's data movement around the sm90 grouped GEMMs: gathering L1's input rows by
// group (bf16, or the staged NVFP4 rows, which is bit-identical to staging the gathered rows:
// same values, same amax), and the clamped SwiGLU between the two GEMMs.
//
// Dimension letters: T tokens, D model width, F expert width, S grouped rows.
#include <algorithm>

#include "base/float_convert.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/moe/expert_mma.cuh"
#include "kernels/cuda/moe/kernels.h"

namespace dsv4::kernels::cuda::moe {
namespace {

constexpr int kThreads = 256;

// One block per grouped row; each thread converts 4 columns.
__global__ void gather_bf16_kernel(const float* x, const int* row_token, int dim, uint16_t* rows) {
  const int r = blockIdx.x;
  const float* src = x + int64_t{row_token[r]} * dim;
  uint16_t* dst = rows + int64_t{r} * dim;
  for (int d = threadIdx.x * 4; d < dim; d += kThreads * 4) {
    const float4 v = *reinterpret_cast<const float4*>(src + d);
    const uint2 packed =
        make_uint2(uint32_t{float_to_bf16(v.x)} | uint32_t{float_to_bf16(v.y)} << 16,
                   uint32_t{float_to_bf16(v.z)} | uint32_t{float_to_bf16(v.w)} << 16);
    *reinterpret_cast<uint2*>(dst + d) = packed;
  }
}

// One block per grouped row: D/2 packed bytes as 16-byte words, then the D/16 scale bytes.
__global__ void gather_nvfp4_kernel(const uint8_t* packed, const uint8_t* scale,
                                    const int* row_token, int dim, uint8_t* rows_packed,
                                    uint8_t* rows_scale) {
  const int r = blockIdx.x, t = row_token[r];
  const uint4* src = reinterpret_cast<const uint4*>(packed + int64_t{t} * (dim / 2));
  uint4* dst = reinterpret_cast<uint4*>(rows_packed + int64_t{r} * (dim / 2));
  for (int i = threadIdx.x; i < dim / 32; i += kThreads) dst[i] = src[i];
  for (int i = threadIdx.x; i < dim / 16; i += kThreads) {
    rows_scale[int64_t{r} * (dim / 16) + i] = scale[int64_t{t} * (dim / 16) + i];
  }
}

// A block per grouped row at a time, each thread 4 columns: gate and up as float4, no 64-bit
// division per element (that version ran at half the copy rate).
__global__ void swiglu_kernel(const float* gate_up, int n_rows, int ffn, float limit,
                              float* act_f32, uint16_t* act_bf16) {
  for (int r = blockIdx.x; r < n_rows; r += gridDim.x) {
    const float* gate = gate_up + int64_t{r} * 2 * ffn;
    for (int j = threadIdx.x * 4; j < ffn; j += kThreads * 4) {
      const float4 g = *reinterpret_cast<const float4*>(gate + j);
      const float4 u = *reinterpret_cast<const float4*>(gate + ffn + j);
      const float4 a = make_float4(swiglu(g.x, u.x, limit), swiglu(g.y, u.y, limit),
                                   swiglu(g.z, u.z, limit), swiglu(g.w, u.w, limit));
      const int64_t at = int64_t{r} * ffn + j;
      if (act_bf16) {
        *reinterpret_cast<uint2*>(act_bf16 + at) =
            make_uint2(uint32_t{float_to_bf16(a.x)} | uint32_t{float_to_bf16(a.y)} << 16,
                       uint32_t{float_to_bf16(a.z)} | uint32_t{float_to_bf16(a.w)} << 16);
      } else {
        *reinterpret_cast<float4*>(act_f32 + at) = a;
      }
    }
  }
}

}  // namespace

void launch_gather_bf16(const float* x, const int* row_token, int n_rows, int dim, uint16_t* rows,
                        cudaStream_t stream) {
  gather_bf16_kernel<<<n_rows, kThreads, 0, stream>>>(x, row_token, dim, rows);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

void launch_gather_nvfp4(const uint8_t* packed, const uint8_t* scale, const int* row_token,
                         int n_rows, int dim, uint8_t* rows_packed, uint8_t* rows_scale,
                         cudaStream_t stream) {
  gather_nvfp4_kernel<<<n_rows, kThreads, 0, stream>>>(packed, scale, row_token, dim, rows_packed,
                                                       rows_scale);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

void launch_swiglu(const float* gate_up, int n_rows, int ffn, float limit, float* act_f32,
                   uint16_t* act_bf16, cudaStream_t stream) {
  DSV4_CHECK(ffn % 4 == 0, "swiglu: expert width %d is not a multiple of 4", ffn);
  const int n_blocks = std::max(1, std::min(n_rows, 8192));
  swiglu_kernel<<<n_blocks, kThreads, 0, stream>>>(gate_up, n_rows, ffn, limit, act_f32, act_bf16);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dsv4::kernels::cuda::moe

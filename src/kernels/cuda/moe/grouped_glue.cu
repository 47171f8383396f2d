// The grouped path's data movement around the sm90 grouped GEMMs: gathering L1's input rows by
// group (bf16, or the staged NVFP4 rows, which is bit-identical to staging the gathered rows:
// same values, same amax). The SwiGLU between the GEMMs is in nvfp4_*_swiglu (moe_ffn.cu).
//
// Dimension letters: T tokens, D model width, F expert width, S grouped rows.
#include "base/float_convert.h"
#include "kernels/cuda/cuda_check.h"
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

}  // namespace dsv4::kernels::cuda::moe

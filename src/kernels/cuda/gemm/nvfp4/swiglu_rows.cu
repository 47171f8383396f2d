// The SwiGLU pass over a GEMM's f32 gate_up rows (swiglu.cuh): the grouped MoE's L1, the EP
// path's, and nvfp4_gemm_swiglu where its kernel has no SwiGLU epilogue.
#include <algorithm>

#include "base/float_convert.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"
#include "kernels/cuda/device/swiglu.cuh"

namespace dsv4::kernels::cuda {
namespace {

constexpr int kThreads = 256;

// A block per row at a time, each thread 4 columns: gate and up as float4, no 64-bit division
// per element (that version ran at half the copy rate).
__global__ void swiglu_rows_kernel(const float* gate_up, int64_t gate_up_stride, int n_rows,
                                   int ffn, float limit, float* act_f32, uint16_t* act_bf16,
                                   int64_t act_stride) {
  for (int r = blockIdx.x; r < n_rows; r += gridDim.x) {
    const float* gate = gate_up + r * gate_up_stride;
    for (int j = threadIdx.x * 4; j < ffn; j += kThreads * 4) {
      const float4 g = *reinterpret_cast<const float4*>(gate + j);
      const float4 u = *reinterpret_cast<const float4*>(gate + ffn + j);
      const float4 a = make_float4(swiglu(g.x, u.x, limit), swiglu(g.y, u.y, limit),
                                   swiglu(g.z, u.z, limit), swiglu(g.w, u.w, limit));
      const int64_t at = r * act_stride + j;
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

void launch_swiglu_rows(const TensorView& gate_up, float limit, const TensorView& act) {
  const int n_rows = static_cast<int>(act.size(0)), ffn = static_cast<int>(act.size(1));
  DSV4_CHECK(gate_up.dtype == DType::kF32 && gate_up.size(0) == act.size(0) &&
                 gate_up.size(1) == 2 * act.size(1) && ffn % 4 == 0 &&
                 gate_up.stride[0] % 4 == 0 && act.stride[0] % 4 == 0 &&
                 (act.dtype == DType::kF32 || act.dtype == DType::kBF16),
             "swiglu rows: gate_up f32 [T, 2F], act f32|bf16 [T, F], F and row strides multiples "
             "of 4 (F %d)", ffn);
  if (n_rows == 0) return;
  const bool bf16 = act.dtype == DType::kBF16;
  swiglu_rows_kernel<<<std::min(n_rows, 8192), kThreads, 0, op_stream()>>>(
      gate_up.data_as<const float>(), gate_up.stride[0], n_rows, ffn, limit,
      bf16 ? nullptr : act.data_as<float>(), bf16 ? act.data_as<uint16_t>() : nullptr,
      act.stride[0]);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

}  // namespace dsv4::kernels::cuda

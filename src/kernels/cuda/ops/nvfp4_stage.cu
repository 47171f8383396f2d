// cuda::stage_activation (cuda_ops.h): bit-identical to cpu::stage_activation because both run
// format::quantize_nvfp4_block and format::GlobalScale (host+device inline, one correctly
// rounded fp32 op each, no fast math). The dynamic amax is a device max-reduction: a max is
// exact and order-free, so the reduction tree cannot change it.
//
// Dimension letters: T tokens (rows), K input features, Kb = K/16.
#include <cuda_bf16.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/stream.h"

namespace dsv4::kernels::cuda {
namespace {

using format::kNvfp4BlockSize;

constexpr int kThreads = 256;

// Element (row, col) of an f32|bf16 [T, K] view with dense rows, as f32 (bf16 -> f32 is exact).
template <typename T>
__device__ __forceinline__ float load_value(const T* x, int64_t offset) {
  if constexpr (sizeof(T) == 4) {
    return x[offset];
  } else {
    return bf16_to_float(x[offset]);
  }
}

// *amax_bits = max(*amax_bits, bits of max |x|): for non-negative floats the bit patterns order
// like the values, so an integer atomicMax is a float max. NaN is skipped by fmaxf, as on the CPU.
template <typename T>
__global__ void amax_kernel(const T* x, int64_t n_rows, int64_t n_cols, int64_t row_stride,
                            uint32_t* amax_bits) {
  float amax = 0.0f;
  const int64_t count = n_rows * n_cols;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    amax = fmaxf(amax, fabsf(load_value(x, (i / n_cols) * row_stride + i % n_cols)));
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  }
  __shared__ float warp_max[kThreads / 32];
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) amax = fmaxf(amax, warp_max[w]);
    atomicMax(amax_bits, __float_as_uint(amax));
  }
}

struct StageArgs {
  int64_t n_rows;
  int64_t n_cols;
  int64_t row_stride;
  const float* input_scale;  // static decode scale, or nullptr
  const uint32_t* amax_bits;  // dynamic amax (when input_scale is nullptr)
  uint8_t* packed;
  uint8_t* block_scale;
  float* global_scale;
  format::ScaleLayout layout;
};

// One thread per 16-element block: the same quantize_nvfp4_block the CPU runs.
template <typename T>
__global__ void quantize_kernel(const T* x, StageArgs args) {
  const int64_t n_kb = args.n_cols / kNvfp4BlockSize;
  const int64_t block = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const format::GlobalScale scale =
      args.input_scale != nullptr
          ? format::GlobalScale::from_decode(args.input_scale[0])
          : format::GlobalScale::from_amax(__uint_as_float(*args.amax_bits));
  if (block == 0) args.global_scale[0] = scale.decode;
  if (block >= args.n_rows * n_kb) return;
  const int64_t row = block / n_kb, kb = block % n_kb;
  float values[kNvfp4BlockSize];
  for (int i = 0; i < kNvfp4BlockSize; ++i) {
    values[i] = load_value(x, row * args.row_stride + kb * kNvfp4BlockSize + i);
  }
  format::Nvfp4Block codes;
  const uint8_t block_scale = format::quantize_nvfp4_block(values, scale.encode, &codes);
  *reinterpret_cast<format::Nvfp4Block*>(args.packed + row * (args.n_cols / 2) +
                                         kb * (kNvfp4BlockSize / 2)) = codes;
  args.block_scale[format::scale_offset(args.layout, row, kb, n_kb)] = block_scale;
}

template <typename T>
void stage(const TensorView& x, StageArgs args, uint32_t* amax_bits) {
  const T* data = x.data_as<const T>();
  const int64_t count = args.n_rows * args.n_cols;
  if (args.input_scale == nullptr) {
    DSV4_CUDA_CHECK(cudaMemsetAsync(amax_bits, 0, sizeof(uint32_t), op_stream()));
    const int64_t blocks = std::min<int64_t>((count + kThreads - 1) / kThreads, 1024);
    amax_kernel<T><<<static_cast<unsigned>(std::max<int64_t>(blocks, 1)), kThreads, 0, op_stream()>>>(
        data, args.n_rows, args.n_cols, args.row_stride, amax_bits);
    DSV4_CUDA_CHECK(cudaGetLastError());
  }
  const int64_t n_blocks = count / kNvfp4BlockSize;
  quantize_kernel<T><<<static_cast<unsigned>(std::max<int64_t>((n_blocks + kThreads - 1) / kThreads,
                                                                 1)),
                       kThreads, 0, op_stream()>>>(data, args);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

Status stage_activation(const TensorView& x, const TensorView& input_scale,
                        const StagedActivation& out) {
  if (x.rank() != 2 || (x.dtype != DType::kF32 && x.dtype != DType::kBF16) || x.stride[1] != 1 ||
      x.size(1) % kNvfp4BlockSize != 0) {
    return invalid_argument("stage_activation: x must be f32|bf16 [T, K] with dense rows and K a "
                            "multiple of 16, got " + x.shape.to_string());
  }
  const int64_t n_rows = x.size(0), n_cols = x.size(1);
  const Shape scale_shape{format::padded_scale_rows(out.scale_layout, n_rows),
                          format::padded_scale_cols(out.scale_layout, n_cols / kNvfp4BlockSize)};
  DSV4_CHECK(out.packed.dtype == DType::kU8 && out.packed.shape == Shape({n_rows, n_cols / 2}) &&
                 out.packed.is_contiguous() && out.block_scale.shape == scale_shape &&
                 out.block_scale.is_contiguous() && out.global_scale.numel() == 1,
             "stage_activation: out does not match x %s", x.shape.to_string().c_str());
  if (out.scale_layout != format::ScaleLayout::kLinear) {
    DSV4_CUDA_CHECK(cudaMemsetAsync(out.block_scale.data, 0, out.block_scale.bytes(), op_stream()));
  }
  DSV4_ASSIGN_OR_RETURN(const Scratch amax, Scratch::allocate(sizeof(uint32_t)));
  uint32_t* amax_bits = amax.as<uint32_t>();
  const StageArgs args{n_rows, n_cols, x.stride[0],
                       input_scale.data != nullptr ? input_scale.data_as<const float>() : nullptr,
                       amax_bits, out.packed.data_as<uint8_t>(),
                       out.block_scale.data_as<uint8_t>(), out.global_scale.data_as<float>(),
                       out.scale_layout};
  if (x.dtype == DType::kF32) {
    stage<float>(x, args, amax_bits);
  } else {
    stage<uint16_t>(x, args, amax_bits);
  }
  return ok_status();
}

}  // namespace dsv4::kernels::cuda

// stage_activation, the CPU reference: x [T, K] -> NVFP4 (packed codes, UE4M3 block scales, one
// f32 decode scale). The per-block arithmetic is format::quantize_nvfp4_block, the same inline
// function the CUDA kernel runs, so both produce the same bits; what this file adds is the
// choice of the global scale and the walk over rows.
//
// Dimension letters: T tokens (rows), K input features, Kb = K/16 block-scale columns.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/float_convert.h"
#include "kernels/cpu/cpu_ops.h"

namespace dsv4::kernels::cpu {
namespace {

using format::kNvfp4BlockSize;
using format::Nvfp4Block;

// Row r of an f32 or bf16 matrix with dense rows, as f32 (bf16 -> f32 is exact).
void load_row(const TensorView& x, int64_t r, float* out) {
  const int64_t n_cols = x.size(1);
  if (x.dtype == DType::kF32) {
    std::memcpy(out, x.data_as<const float>() + r * x.stride[0], n_cols * sizeof(float));
    return;
  }
  const uint16_t* row = x.data_as<const uint16_t>() + r * x.stride[0];
  for (int64_t c = 0; c < n_cols; ++c) out[c] = bf16_to_float(row[c]);
}

// Dynamic global scale: max |x| over the whole tensor. A max is exact and order-free, so any
// reduction tree (the CUDA one included) gets the same value.
float activation_amax(const TensorView& x) {
  const int64_t n_rows = x.size(0), n_cols = x.size(1);
  float amax = 0.0f;
#pragma omp parallel reduction(max : amax) if (n_rows * n_cols > kParallelWork)
  {
    std::vector<float> row(n_cols);
#pragma omp for
    for (int64_t r = 0; r < n_rows; ++r) {
      load_row(x, r, row.data());
      for (float v : row) amax = fmaxf(amax, fabsf(v));
    }
  }
  return amax;
}

void check_operands(const TensorView& x, const TensorView& input_scale,
                    const StagedActivation& out) {
  DSV4_CHECK(
      x.rank() == 2 && (x.dtype == DType::kF32 || x.dtype == DType::kBF16) && x.stride[1] == 1,
      "stage_activation: x must be f32|bf16 [T, K] with dense rows");
  const int64_t n_rows = x.size(0), n_cols = x.size(1);
  DSV4_CHECK(n_cols % kNvfp4BlockSize == 0, "stage_activation: K=%lld is not a multiple of 16",
             (long long)n_cols);
  const int64_t n_kb = n_cols / kNvfp4BlockSize;
  const Shape scale_shape{format::padded_scale_rows(out.scale_layout, n_rows),
                          format::padded_scale_cols(out.scale_layout, n_kb)};
  DSV4_CHECK(out.packed.dtype == DType::kU8 && out.packed.shape == Shape({n_rows, n_cols / 2}) &&
                 out.packed.is_contiguous(),
             "stage_activation: packed must be u8 [%lld, %lld]", (long long)n_rows,
             (long long)(n_cols / 2));
  DSV4_CHECK(out.block_scale.dtype == DType::kU8 && out.block_scale.shape == scale_shape &&
                 out.block_scale.is_contiguous(),
             "stage_activation: block_scale must be u8 %s", scale_shape.to_string().c_str());
  DSV4_CHECK(out.global_scale.dtype == DType::kF32 && out.global_scale.numel() == 1,
             "stage_activation: global_scale must be f32 [1]");
  DSV4_CHECK(
      input_scale.data == nullptr || (input_scale.dtype == DType::kF32 && input_scale.numel() == 1),
      "stage_activation: input_scale must be f32 [1] or empty");
}

}  // namespace

void stage_activation(const TensorView& x, const TensorView& input_scale,
                      const StagedActivation& out) {
  check_operands(x, input_scale, out);
  const int64_t n_rows = x.size(0), n_cols = x.size(1), n_kb = n_cols / kNvfp4BlockSize;
  // Static: ModelOpt's calibrated decode scale as is (alpha = input_scale · weight_scale_2
  // exactly as vLLM forms it). Dynamic: decode = amax / 2688. Either way encode = 1 / decode.
  const format::GlobalScale scale =
      input_scale.data != nullptr ? format::GlobalScale::from_decode(*input_scale.data_as<float>())
                                  : format::GlobalScale::from_amax(activation_amax(x));
  uint8_t* packed = out.packed.data_as<uint8_t>();
  uint8_t* block_scale = out.block_scale.data_as<uint8_t>();
  if (out.scale_layout != format::ScaleLayout::kLinear) {
    std::memset(block_scale, 0, out.block_scale.bytes());  // the padding of the 128x4 atoms
  }
#pragma omp parallel if (n_rows * n_cols > kParallelWork)
  {
    std::vector<float> row(n_cols);
#pragma omp for
    for (int64_t r = 0; r < n_rows; ++r) {
      load_row(x, r, row.data());
      auto* blocks = reinterpret_cast<Nvfp4Block*>(packed + r * (n_cols / 2));
      for (int64_t kb = 0; kb < n_kb; ++kb) {
        block_scale[format::scale_offset(out.scale_layout, r, kb, n_kb)] =
            format::quantize_nvfp4_block(row.data() + kb * kNvfp4BlockSize, scale.encode,
                                         &blocks[kb]);
      }
    }
  }
  *out.global_scale.data_as<float>() = scale.decode;
}

}  // namespace dsv4::kernels::cpu

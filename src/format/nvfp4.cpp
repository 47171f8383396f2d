// The NVFP4 references: quantize / dequantize a stack of matrices on the host and convert the
// block scales between the file layout (linear) and the 128x4 swizzled one. The arithmetic per
// block is the inline code in nvfp4.h; this file walks tensors and checks shapes.
//
// Dimension letters: G matrices, N rows, K columns, Kb = K/16, Np = pad128(N), Kbp = pad4(Kb).
#include "format/nvfp4.h"

#include <cmath>
#include <cstring>
#include <string>

namespace dsv4::format {
namespace {

// Blocks below which quantize_ref stays on one thread: forking costs more than a small matrix,
// far more on a loaded machine.
constexpr int64_t kParallelBlocks = 4096;

std::string shape_message(const char* what, const char* tensor, const std::string& expected,
                          const TensorView& got) {
  return std::string(what) + " " + tensor + ": expected " + expected + ", got " +
         std::string(dtype_name(got.dtype)) + " " + got.shape.to_string();
}

// Copies every logical (row, kb) scale of G matrices from one layout to the other.
void convert_scales(const uint8_t* src, ScaleLayout src_layout, uint8_t* dst,
                    ScaleLayout dst_layout, int64_t n_matrices, int64_t n_rows, int64_t n_kb) {
  const int64_t src_bytes =
      padded_scale_rows(src_layout, n_rows) * padded_scale_cols(src_layout, n_kb);
  const int64_t dst_bytes =
      padded_scale_rows(dst_layout, n_rows) * padded_scale_cols(dst_layout, n_kb);
  std::memset(dst, 0, static_cast<size_t>(n_matrices * dst_bytes));
  for (int64_t g = 0; g < n_matrices; ++g) {
    for (int64_t r = 0; r < n_rows; ++r) {
      for (int64_t kb = 0; kb < n_kb; ++kb) {
        dst[g * dst_bytes + scale_offset(dst_layout, r, kb, n_kb)] =
            src[g * src_bytes + scale_offset(src_layout, r, kb, n_kb)];
      }
    }
  }
}

}  // namespace

Status validate_nvfp4(const Nvfp4View& view, const char* what) {
  const TensorView& packed = view.packed;
  if (packed.dtype != DType::kU8 || packed.rank() != 3 || !packed.is_contiguous()) {
    return invalid_argument(shape_message(what, "packed", "contiguous U8 [G, N, K/2]", packed));
  }
  const int64_t n_matrices = packed.shape[0], n_rows = packed.shape[1],
                n_cols = packed.shape[2] * 2;
  if (n_cols % kNvfp4BlockSize != 0) {
    return invalid_argument(std::string(what) + ": K=" + std::to_string(n_cols) +
                            " is not a multiple of 16");
  }
  const int64_t n_kb = n_cols / kNvfp4BlockSize;
  const Shape scale_shape{n_matrices, padded_scale_rows(view.scale_layout, n_rows),
                          padded_scale_cols(view.scale_layout, n_kb)};
  if (view.block_scale.dtype != DType::kU8 && view.block_scale.dtype != DType::kF8E4M3) {
    return invalid_argument(
        shape_message(what, "block_scale", "U8 " + scale_shape.to_string(), view.block_scale));
  }
  if (view.block_scale.shape != scale_shape || !view.block_scale.is_contiguous()) {
    return invalid_argument(
        shape_message(what, "block_scale", "U8 " + scale_shape.to_string(), view.block_scale));
  }
  if (view.global_scale.dtype != DType::kF32 || view.global_scale.shape != Shape{n_matrices}) {
    return invalid_argument(shape_message(
        what, "global_scale", "F32 [" + std::to_string(n_matrices) + "]", view.global_scale));
  }
  return ok_status();
}

float amax_abs(const float* x, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = fmaxf(amax, fabsf(x[i]));
  return amax;
}

Result<Nvfp4Tensor> quantize_ref(const float* x, int64_t n_matrices, int64_t n_rows, int64_t n_cols,
                                 const std::vector<GlobalScale>& scales) {
  if (n_cols % kNvfp4BlockSize != 0) {
    return invalid_argument("quantize_ref: K=" + std::to_string(n_cols) +
                            " is not a multiple of 16");
  }
  if (static_cast<int64_t>(scales.size()) != n_matrices) {
    return invalid_argument("quantize_ref: " + std::to_string(scales.size()) +
                            " global scales for " + std::to_string(n_matrices) + " matrices");
  }
  const int64_t n_kb = n_cols / kNvfp4BlockSize;
  Nvfp4Tensor t;
  t.packed = Tensor::host(DType::kU8, {n_matrices, n_rows, n_cols / 2});
  t.block_scale = Tensor::host(DType::kU8, {n_matrices, n_rows, n_kb});
  t.global_scale = Tensor::host(DType::kF32, {n_matrices});
  auto* blocks = reinterpret_cast<Nvfp4Block*>(t.packed.data_as<uint8_t>());
  uint8_t* block_scale = t.block_scale.data_as<uint8_t>();
  for (int64_t g = 0; g < n_matrices; ++g) {
    t.global_scale.data_as<float>()[g] = scales[g].decode;
    const int64_t first = g * n_rows * n_kb;  // blocks and scales share the [G, N, Kb] index
#pragma omp parallel for if (n_rows * n_kb > kParallelBlocks)
    for (int64_t b = first; b < first + n_rows * n_kb; ++b) {
      block_scale[b] = quantize_nvfp4_block(x + b * kNvfp4BlockSize, scales[g].encode, &blocks[b]);
    }
  }
  return t;
}

Result<Nvfp4Tensor> quantize_ref(const float* x, int64_t n_rows, int64_t n_cols,
                                 GlobalScale scale) {
  return quantize_ref(x, 1, n_rows, n_cols, std::vector<GlobalScale>{scale});
}

Result<Tensor> dequantize_ref(const Nvfp4View& view) {
  DSV4_RETURN_IF_ERROR(validate_nvfp4(view, "dequantize_ref"));
  if (view.packed.device != Device::kCpu || view.block_scale.device != Device::kCpu ||
      view.global_scale.device != Device::kCpu) {
    return invalid_argument("dequantize_ref: the tensor must be in host memory");
  }
  const int64_t n_matrices = view.n_matrices(), n_rows = view.n_rows(), n_cols = view.n_cols();
  const int64_t n_kb = n_cols / kNvfp4BlockSize;
  const int64_t scale_bytes = view.block_scale.numel() / (n_matrices > 0 ? n_matrices : 1);
  Tensor out = Tensor::host(DType::kF32, {n_matrices, n_rows, n_cols});
  const auto* blocks = view.packed.data_as<const Nvfp4Block>();
  const uint8_t* block_scale = view.block_scale.data_as<const uint8_t>();
  float* dst = out.data_as<float>();
  for (int64_t g = 0; g < n_matrices; ++g) {
    const float decode = view.global_scale.data_as<const float>()[g];
    for (int64_t r = 0; r < n_rows; ++r) {
      for (int64_t kb = 0; kb < n_kb; ++kb) {
        const int64_t b = (g * n_rows + r) * n_kb + kb;
        const uint8_t scale =
            block_scale[g * scale_bytes + scale_offset(view.scale_layout, r, kb, n_kb)];
        for (int i = 0; i < kNvfp4BlockSize; ++i) {
          dst[b * kNvfp4BlockSize + i] = nvfp4_block_value(blocks[b], scale, i) * decode;
        }
      }
    }
  }
  return out;
}

Result<Tensor> to_swizzled(const TensorView& linear_scales) {
  if ((linear_scales.dtype != DType::kU8 && linear_scales.dtype != DType::kF8E4M3) ||
      linear_scales.rank() != 3 || !linear_scales.is_contiguous() ||
      linear_scales.device != Device::kCpu) {
    return invalid_argument(
        shape_message("to_swizzled", "scales", "host U8 [G, N, Kb]", linear_scales));
  }
  const int64_t n_matrices = linear_scales.shape[0], n_rows = linear_scales.shape[1];
  const int64_t n_kb = linear_scales.shape[2];
  const ScaleLayout swizzled = ScaleLayout::kSwizzled128x4;
  Tensor out = Tensor::host(DType::kU8, {n_matrices, padded_scale_rows(swizzled, n_rows),
                                         padded_scale_cols(swizzled, n_kb)});
  convert_scales(linear_scales.data_as<const uint8_t>(), ScaleLayout::kLinear,
                 out.data_as<uint8_t>(), swizzled, n_matrices, n_rows, n_kb);
  return out;
}

Result<Tensor> to_linear(const TensorView& swizzled_scales, int64_t n_rows, int64_t n_kb) {
  const ScaleLayout swizzled = ScaleLayout::kSwizzled128x4;
  const int64_t n_matrices = swizzled_scales.rank() == 3 ? swizzled_scales.shape[0] : -1;
  const Shape expected{n_matrices, padded_scale_rows(swizzled, n_rows),
                       padded_scale_cols(swizzled, n_kb)};
  if ((swizzled_scales.dtype != DType::kU8 && swizzled_scales.dtype != DType::kF8E4M3) ||
      swizzled_scales.shape != expected || !swizzled_scales.is_contiguous() ||
      swizzled_scales.device != Device::kCpu) {
    return invalid_argument(
        shape_message("to_linear", "scales", "host U8 " + expected.to_string(), swizzled_scales));
  }
  Tensor out = Tensor::host(DType::kU8, {n_matrices, n_rows, n_kb});
  convert_scales(swizzled_scales.data_as<const uint8_t>(), swizzled, out.data_as<uint8_t>(),
                 ScaleLayout::kLinear, n_matrices, n_rows, n_kb);
  return out;
}

Status set_scale_layout(Nvfp4Tensor& tensor, ScaleLayout layout) {
  if (tensor.scale_layout == layout) return ok_status();
  const int64_t n_rows = tensor.n_rows(), n_kb = tensor.n_cols() / kNvfp4BlockSize;
  Result<Tensor> converted = layout == ScaleLayout::kSwizzled128x4
                                 ? to_swizzled(tensor.block_scale.view())
                                 : to_linear(tensor.block_scale.view(), n_rows, n_kb);
  if (!converted.ok()) return converted.status();
  tensor.block_scale = std::move(converted).value();
  tensor.scale_layout = layout;
  return ok_status();
}

}  // namespace dsv4::format

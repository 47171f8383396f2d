// Access to the transformers oracle data under tests/golden/<config>_<layout>/ for the model
// tests: tensors of model/model.safetensors, reference.safetensors and layers.safetensors (the
// output of every transformers submodule for prompt_0), converted to host f32 (or i64) Tensors.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "base/buffer.h"
#include "base/float_convert.h"
#include "format/safetensors.h"

namespace dsv4::testing {

inline std::string golden_path(const std::string& relative) {
  const char* root = std::getenv("DSV4_SOURCE_DIR");
  return std::string(root ? root : DSV4_DEFAULT_SOURCE_DIR) + "/tests/golden/" + relative;
}

inline format::SafetensorsFile open_golden(const std::string& relative) {
  auto file = format::SafetensorsFile::open(golden_path(relative));
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  return std::move(file).value();
}

// The named tensor as host f32 (from f32 or bf16) or i64 (from i64), leading batch dims of 1
// dropped from `shape` when given.
inline Tensor golden_tensor(const format::SafetensorsFile& file, const std::string& name,
                            Shape shape = {}) {
  const format::TensorInfo* info = file.find(name);
  EXPECT_NE(info, nullptr) << name << " not in " << file.path();
  if (info == nullptr) return Tensor::host(DType::kF32, {1});
  if (shape.rank == 0) shape = info->shape;
  EXPECT_EQ(shape.numel(), info->shape.numel()) << name;
  const int64_t n = info->shape.numel();
  if (info->dtype == DType::kI64) {
    Tensor t = Tensor::host(DType::kI64, shape);
    std::memcpy(t.data_as<int64_t>(), info->data, n * sizeof(int64_t));
    return t;
  }
  Tensor t = Tensor::host(DType::kF32, shape);
  float* dst = t.data_as<float>();
  if (info->dtype == DType::kF32) {
    std::memcpy(dst, info->data, n * sizeof(float));
  } else {
    EXPECT_EQ(info->dtype, DType::kBF16) << name;
    const auto* src = reinterpret_cast<const uint16_t*>(info->data);
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]);
  }
  return t;
}

}  // namespace dsv4::testing

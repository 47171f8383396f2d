// Both backends' view of an f32 operand as a matrix of rows: a rank-1 tensor is one row, a rank-2
// tensor may have strided rows (a column slice of a wider matrix), a higher rank must be
// contiguous and is flattened to [outer, last]. Internal to kernels: the CPU reference loops over
// it, and the CUDA ops (cuda/device/common.cuh) check their operands with the same function and
// pass the struct to their kernels by value.
#pragma once

#include <cstdint>

#include "base/check.h"
#include "base/tensor.h"

namespace dsv4::kernels {

struct RowMatrix {
  float* data = nullptr;
  int64_t n_rows = 0;
  int64_t n_cols = 0;
  int64_t row_stride = 0;  // in elements

  float* row(int64_t r) const { return data + r * row_stride; }
};

inline RowMatrix as_rows(const TensorView& view, const char* what) {
  DSV4_CHECK(view.dtype == DType::kF32, "%s: expected f32, got %s", what,
             std::string(dtype_name(view.dtype)).c_str());
  DSV4_CHECK(view.rank() >= 1, "%s: rank 0", what);
  RowMatrix m;
  m.data = view.data_as<float>();
  m.n_cols = view.size(-1);
  if (view.rank() == 1) {
    DSV4_CHECK(view.stride[0] == 1, "%s: strided vector", what);
    m.n_rows = 1;
    m.row_stride = m.n_cols;
  } else if (view.rank() == 2) {
    DSV4_CHECK(view.stride[1] == 1 && view.stride[0] >= m.n_cols, "%s: rows must be dense", what);
    m.n_rows = view.size(0);
    m.row_stride = view.stride[0];
  } else {
    DSV4_CHECK(view.is_contiguous(), "%s: rank-%d tensor must be contiguous", what, view.rank());
    m.n_rows = 1;  // the outer dims' product (numel / n_cols would divide by a zero width)
    for (int d = 0; d + 1 < view.rank(); ++d) m.n_rows *= view.size(d);
    m.row_stride = m.n_cols;
  }
  return m;
}

}  // namespace dsv4::kernels

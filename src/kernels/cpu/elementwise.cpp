// Small row-wise ops of the dense section: softmax, the clamped SwiGLU, add, the row lookups
// (embedding by index, gather_rows by address) and copy_blocks.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/contracts.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/row_matrix.h"

namespace dsv4::kernels::cpu {

void softmax(const TensorView& x, const TensorView& y) {
  const RowMatrix in = as_rows(x, "softmax x");
  const RowMatrix out = as_rows(y, "softmax y");
  DSV4_CHECK(in.n_rows == out.n_rows && in.n_cols == out.n_cols, "softmax: x and y differ");
#pragma omp parallel for if (in.n_rows * in.n_cols > (1 << 14))
  for (int64_t r = 0; r < in.n_rows; ++r) {
    const float* src = in.row(r);
    float* dst = out.row(r);
    const float max = *std::max_element(src, src + in.n_cols);
    double sum = 0.0;
    for (int64_t i = 0; i < in.n_cols; ++i) {
      dst[i] = std::exp(src[i] - max);
      sum += dst[i];
    }
    const float inv_sum = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < in.n_cols; ++i) dst[i] *= inv_sum;
  }
}

void swiglu(const TensorView& gate_up, float limit, const TensorView& out) {
  const auto [in, dst] = swiglu_operands(gate_up, out);
  const int64_t f = dst.n_cols;
#pragma omp parallel for if (dst.n_rows * f > (1 << 14))
  for (int64_t r = 0; r < dst.n_rows; ++r) {
    const float* gate = in.row(r);
    const float* up = gate + f;
    float* o = dst.row(r);
    for (int64_t i = 0; i < f; ++i) {
      float g = gate[i];
      float u = up[i];
      if (limit > 0.0f) {
        g = std::min(g, limit);
        u = std::clamp(u, -limit, limit);
      }
      o[i] = g / (1.0f + std::exp(-g)) * u;
    }
  }
}

void add(const TensorView& a, const TensorView& b, const TensorView& y) {
  check_add(a, b, y);
  const float* pa = a.data_as<const float>();
  const float* pb = b.data_as<const float>();
  float* py = y.data_as<float>();
  const int64_t n = y.numel();
#pragma omp parallel for if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) py[i] = pa[i] + pb[i];
}

void embedding(const TensorView& table, const TensorView& ids, const TensorView& y) {
  check_embedding(table, ids, y);
  const size_t row_bytes = table.size(1) * dtype_size(table.dtype);
  const int64_t* id = ids.data_as<const int64_t>();
  for (int64_t t = 0; t < y.size(0); ++t) {
    DSV4_CHECK(0 <= id[t] && id[t] < table.size(0), "embedding: id %lld out of range",
               (long long)id[t]);
    std::memcpy(static_cast<char*>(y.data) + t * row_bytes,
                static_cast<const char*>(table.data) + id[t] * row_bytes, row_bytes);
  }
}

void gather_rows(const TensorView& rows, const TensorView& y) {
  const GatherRowsOperands o = gather_rows_operands(rows, y);
  for (int64_t i = 0; i < o.n_rows; ++i) {
    std::memcpy(o.y + i * o.row_bytes, reinterpret_cast<const char*>(o.rows[i]),
                static_cast<size_t>(o.row_bytes));
  }
}

void copy_blocks(const TensorView& sources, const TensorView& destinations,
                 const TensorView& bytes) {
  const CopyBlocksOperands o = copy_blocks_operands(sources, destinations, bytes);
  for (int64_t i = 0; i < o.n_blocks; ++i) {
    std::memcpy(reinterpret_cast<char*>(o.destinations[i]),
                reinterpret_cast<const char*>(o.sources[i]), static_cast<size_t>(o.bytes[i]));
  }
}

}  // namespace dsv4::kernels::cpu

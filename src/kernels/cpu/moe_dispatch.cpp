// The data movement around the routed experts on the CPU, unfused: gather each expert's tokens
// into contiguous rows, run every expert's GEMM on its rows (grouped_linear for dense experts,
// nvfp4_grouped_gemm for NVFP4 ones), and combine the rows back per token with the routing
// weights. This is the path the model's reference forward takes for any expert format.
//
// Dimension letters: T tokens, K experts per token, R = T·K grouped rows, D model width.
#include <cstring>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/row_matrix.h"

namespace dsv4::kernels::cpu {

void moe_gather(const TensorView& x, const TensorView& order, const TensorView& y) {
  const RowMatrix in = as_rows(x, "moe_gather x");
  const RowMatrix out = as_rows(y, "moe_gather y");
  DSV4_CHECK(order.dtype == DType::kI32 && order.numel() == out.n_rows && in.n_cols == out.n_cols &&
                 in.n_rows > 0 && out.n_rows % in.n_rows == 0,
             "moe_gather: y must be [T·K, D] with order i32 [T·K]");
  const int64_t k = out.n_rows / in.n_rows;
  const int32_t* slot = order.data_as<const int32_t>();
  for (int64_t r = 0; r < out.n_rows; ++r) {
    std::memcpy(out.row(r), in.row(slot[r] / k), sizeof(float) * in.n_cols);
  }
}

void moe_combine(const TensorView& expert_out, const TensorView& order, const TensorView& weights,
                 const TensorView& out) {
  const RowMatrix rows = as_rows(expert_out, "moe_combine expert_out");
  const RowMatrix w = as_rows(weights, "moe_combine weights");
  const RowMatrix dst = as_rows(out, "moe_combine out");
  const int64_t k = w.n_cols, d = dst.n_cols;
  DSV4_CHECK(order.dtype == DType::kI32 && order.numel() == rows.n_rows &&
                 rows.n_rows == dst.n_rows * k && w.n_rows == dst.n_rows && rows.n_cols == d,
             "moe_combine: expert_out [T·K, D], weights [T, K], out [T, D]");
  for (int64_t t = 0; t < dst.n_rows; ++t) std::memset(dst.row(t), 0, sizeof(float) * d);
  const int32_t* slot = order.data_as<const int32_t>();
  for (int64_t r = 0; r < rows.n_rows; ++r) {
    const int64_t t = slot[r] / k;
    const float weight = w.row(t)[slot[r] % k];
    const float* src = rows.row(r);
    float* o = dst.row(t);
    for (int64_t i = 0; i < d; ++i) o[i] += src[i] * weight;
  }
}

void grouped_linear(const TensorView& x, const TensorView& w, const TensorView& offsets,
                    const TensorView& y) {
  DSV4_CHECK(w.dtype == DType::kF32 && w.rank() == 3 && w.is_contiguous(),
             "grouped_linear: w must be f32 [G, N, K]");
  DSV4_CHECK(offsets.dtype == DType::kI32 && offsets.numel() == w.size(0) + 1,
             "grouped_linear: offsets must be i32 [G+1]");
  const int32_t* off = offsets.data_as<const int32_t>();
  DSV4_CHECK(off[0] == 0 && off[w.size(0)] == x.size(0), "grouped_linear: offsets do not cover x");
  for (int64_t g = 0; g < w.size(0); ++g) {
    DSV4_CHECK(off[g] <= off[g + 1], "grouped_linear: offsets decrease at %lld", (long long)g);
    if (off[g] == off[g + 1]) continue;
    const TensorView w_g = w.rows(g, g + 1).reshaped({w.size(1), w.size(2)});
    linear(x.rows(off[g], off[g + 1]), w_g, y.rows(off[g], off[g + 1]));
  }
}

}  // namespace dsv4::kernels::cpu

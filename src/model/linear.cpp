#include "model/linear.h"

#include "kernels/ops.h"

namespace dsv4::model {

Status linear(const TensorView& x, const checkpoint::LinearWeight& w, const TensorView& y) {
  if (w.is_fp8()) return kernels::linear(x, w.fp8_view(), y);
  return kernels::linear(x, w.view(), y);
}

Status block_diagonal_linear(const TensorView& x, const checkpoint::LinearWeight& w,
                             int64_t n_groups, const TensorView& y) {
  if (w.is_fp8()) return kernels::block_diagonal_linear(x, w.fp8_view(), n_groups, y);
  return kernels::block_diagonal_linear(x, w.view(), n_groups, y);
}

}  // namespace dsv4::model

#include "model/linear.h"

#include "kernels/ops.h"
#include "model/scratch.h"

namespace dsv4::model {
namespace {

// DeepSeek's FP8 linear: x quantized per row in groups of 128 columns, then the block GEMM.
Status fast_linear(const TensorView& x, const checkpoint::LinearWeight& w, const TensorView& y) {
  const int64_t t = x.size(0), k = x.size(1);
  const int64_t groups = (k + format::kFp8ActivationGroup - 1) / format::kFp8ActivationGroup;
  DSV4_ASSIGN_OR_RETURN(const Tensor values, scratch(DType::kF8E4M3, {t, k}, x.device));
  DSV4_ASSIGN_OR_RETURN(const Tensor scales, scratch(DType::kF32, {t, groups}, x.device));
  return kernels::linear_fp8(x, w.fp8_view(), {values.view(), scales.view()}, y);
}

}  // namespace

Status linear(const TensorView& x, const checkpoint::LinearWeight& w, const TensorView& y,
              Numerics numerics) {
  if (!w.is_fp8()) return kernels::linear(x, w.view(), y);
  if (numerics == Numerics::kFast && w.shape()[1] % 16 == 0) return fast_linear(x, w, y);
  return kernels::linear(x, w.fp8_view(), y);
}

Status block_diagonal_linear(const TensorView& x, const checkpoint::LinearWeight& w,
                             int64_t n_groups, const TensorView& y) {
  if (w.is_fp8()) return kernels::block_diagonal_linear(x, w.fp8_view(), n_groups, y);
  return kernels::block_diagonal_linear(x, w.view(), n_groups, y);
}

}  // namespace dsv4::model

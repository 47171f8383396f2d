#include "model/linear.h"

#include "kernels/ops.h"
#include "model/scratch.h"

namespace dsv4::model {
namespace {

// Whether linear() runs w as DeepSeek's FP8 GEMM (the fast profile; K a multiple of 16).
bool takes_fp8_gemm(const checkpoint::LinearWeight& w, Numerics numerics) {
  return w.is_fp8() && numerics == Numerics::kFast && w.shape()[1] % 16 == 0;
}

// Room for x [T, K] quantized for the FP8 GEMM, per row in groups of 128 columns: codes [T, K]
// and scales [T, Kb] (Kb = ceil(K / 128)).
struct Fp8Input {
  Tensor values, scales;
  kernels::Fp8Activation view() const { return {values.view(), scales.view()}; }
};

Result<Fp8Input> fp8_input_for(const TensorView& x) {
  const int64_t t = x.size(0), k = x.size(1);
  const int64_t groups = (k + format::kFp8ActivationGroup - 1) / format::kFp8ActivationGroup;
  Fp8Input a;
  DSV4_ASSIGN_OR_RETURN(a.values, scratch(DType::kF8E4M3, {t, k}, x.device));
  DSV4_ASSIGN_OR_RETURN(a.scales, scratch(DType::kF32, {t, groups}, x.device));
  return a;
}

}  // namespace

Status linear(const TensorView& x, const checkpoint::LinearWeight& w, const TensorView& y,
              Numerics numerics) {
  if (!w.is_fp8()) return kernels::linear(x, w.view(), y);
  if (!takes_fp8_gemm(w, numerics)) return kernels::linear(x, w.fp8_view(), y);
  DSV4_ASSIGN_OR_RETURN(const Fp8Input a, fp8_input_for(x));
  return kernels::linear_fp8(x, w.fp8_view(), a.view(), y);
}

Status linear_pair(const TensorView& x, const LinearOutput& a, const LinearOutput& b,
                   Numerics numerics) {
  if (!takes_fp8_gemm(a.w, numerics) || !takes_fp8_gemm(b.w, numerics)) {
    DSV4_RETURN_IF_ERROR(linear(x, a.w, a.y, numerics));
    return linear(x, b.w, b.y, numerics);
  }
  DSV4_ASSIGN_OR_RETURN(const Fp8Input q, fp8_input_for(x));
  DSV4_RETURN_IF_ERROR(kernels::quantize_activation_fp8(x, q.view()));
  DSV4_RETURN_IF_ERROR(kernels::linear_fp8(q.view(), a.w.fp8_view(), a.y));
  return kernels::linear_fp8(q.view(), b.w.fp8_view(), b.y);
}

Status block_diagonal_linear(const TensorView& x, const checkpoint::LinearWeight& w,
                             int64_t n_groups, const TensorView& y, Numerics numerics) {
  if (!w.is_fp8()) return kernels::block_diagonal_linear(x, w.view(), n_groups, y);
  const int64_t group_rows = w.shape()[0] / n_groups;
  if (numerics != Numerics::kFast || w.shape()[1] % format::kFp8ActivationGroup != 0 ||
      group_rows % format::kFp8WeightBlock != 0) {
    return kernels::block_diagonal_linear(x, w.fp8_view(), n_groups, y);
  }
  DSV4_ASSIGN_OR_RETURN(const Fp8Input a, fp8_input_for(x));
  DSV4_RETURN_IF_ERROR(kernels::quantize_activation_fp8(x, a.view()));
  return kernels::block_diagonal_linear_fp8(a.view(), w.fp8_view(), n_groups, y);
}

}  // namespace dsv4::model

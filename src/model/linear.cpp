#include "model/linear.h"

#include "kernels/ops.h"
#include "model/scratch.h"

namespace dsv4::model {
namespace {

// Whether linear() runs w as DeepSeek's FP8 GEMM (the fast profile; K a multiple of 16).
bool takes_fp8_gemm(const checkpoint::LinearWeight& w, Numerics numerics) {
  return w.is_fp8() && numerics == Numerics::kFast && w.shape()[1] % 16 == 0;
}

// The fast profile's grouped FP8 GEMM takes an FP8 weight whose group width K and group rows R
// are whole activation groups and weight blocks (multiples of 128).
bool takes_block_diagonal_fp8_gemm(const checkpoint::LinearWeight& w, int64_t n_groups,
                                   Numerics numerics) {
  return w.is_fp8() && numerics == Numerics::kFast &&
         w.shape()[1] % format::kFp8ActivationGroup == 0 &&
         (w.shape()[0] / n_groups) % format::kFp8WeightBlock == 0;
}

// Room for an activation [T, K]'s FP8 form.
Result<Fp8Room> make_fp8_room(int64_t n_rows, int64_t n_cols, Device device) {
  const int64_t n_groups = (n_cols + format::kFp8ActivationGroup - 1) / format::kFp8ActivationGroup;
  Fp8Room room;
  DSV4_ASSIGN_OR_RETURN(room.values, scratch(DType::kF8E4M3, {n_rows, n_cols}, device));
  DSV4_ASSIGN_OR_RETURN(room.scales, scratch(DType::kF32, {n_rows, n_groups}, device));
  return room;
}

// An empty activation's rows stay empty.
TensorView rows_or_empty(const TensorView& v, int64_t begin, int64_t end) {
  return v.data == nullptr ? v : v.rows(begin, end);
}

}  // namespace

LinearInput LinearInput::rows(int64_t begin, int64_t end) const {
  return {x.rows(begin, end),
          {rows_or_empty(fp8.values, begin, end), rows_or_empty(fp8.scales, begin, end)}};
}

Result<Fp8Room> fp8_room(int64_t n_rows, int64_t n_cols, Device device, Numerics numerics,
                         std::initializer_list<const checkpoint::LinearWeight*> readers) {
  for (const checkpoint::LinearWeight* w : readers) {
    if (w != nullptr && takes_fp8_gemm(*w, numerics)) {
      return make_fp8_room(n_rows, n_cols, device);
    }
  }
  return Fp8Room{};
}

Result<Fp8Room> block_diagonal_fp8_room(int64_t n_rows, int64_t n_cols, Device device,
                                        Numerics numerics, const checkpoint::LinearWeight& w,
                                        int64_t n_groups) {
  if (!takes_block_diagonal_fp8_gemm(w, n_groups, numerics)) return Fp8Room{};
  return make_fp8_room(n_rows, n_cols, device);
}

Status rms_norm_for_linears(const TensorView& x, const TensorView& weight, float eps,
                            const TensorView& y, const kernels::Fp8Activation& y_fp8) {
  if (y_fp8.values.data == nullptr) return kernels::rms_norm(x, weight, eps, y);
  return kernels::rms_norm_fp8(x, weight, eps, y, y_fp8);
}

Status linear(const LinearInput& x, const checkpoint::LinearWeight& w, const TensorView& y,
              Numerics numerics) {
  if (!w.is_fp8()) return kernels::linear(x.x, w.view(), y);
  if (!takes_fp8_gemm(w, numerics)) return kernels::linear(x.x, w.fp8_view(), y);
  if (x.quantized()) return kernels::linear_fp8(x.fp8, w.fp8_view(), y);
  DSV4_ASSIGN_OR_RETURN(const Fp8Room a, make_fp8_room(x.x.size(0), x.x.size(1), x.x.device));
  return kernels::linear_fp8(x.x, w.fp8_view(), a.view(), y);
}

Status linear_pair(const LinearInput& x, const LinearOutput& a, const LinearOutput& b,
                   Numerics numerics) {
  if (x.quantized() || !takes_fp8_gemm(a.w, numerics) || !takes_fp8_gemm(b.w, numerics)) {
    DSV4_RETURN_IF_ERROR(linear(x, a.w, a.y, numerics));
    return linear(x, b.w, b.y, numerics);
  }
  DSV4_ASSIGN_OR_RETURN(const Fp8Room q, make_fp8_room(x.x.size(0), x.x.size(1), x.x.device));
  DSV4_RETURN_IF_ERROR(kernels::quantize_activation_fp8(x.x, q.view()));
  return linear_pair(LinearInput(x.x, q.view()), a, b, numerics);
}

Status block_diagonal_linear(const LinearInput& x, const checkpoint::LinearWeight& w,
                             int64_t n_groups, const TensorView& y, Numerics numerics) {
  if (!w.is_fp8()) return kernels::block_diagonal_linear(x.x, w.view(), n_groups, y);
  if (!takes_block_diagonal_fp8_gemm(w, n_groups, numerics)) {
    return kernels::block_diagonal_linear(x.x, w.fp8_view(), n_groups, y);
  }
  if (x.quantized()) return kernels::block_diagonal_linear_fp8(x.fp8, w.fp8_view(), n_groups, y);
  DSV4_ASSIGN_OR_RETURN(const Fp8Room a, make_fp8_room(x.x.size(0), x.x.size(1), x.x.device));
  DSV4_RETURN_IF_ERROR(kernels::quantize_activation_fp8(x.x, a.view()));
  return kernels::block_diagonal_linear_fp8(a.view(), w.fp8_view(), n_groups, y);
}

}  // namespace dsv4::model

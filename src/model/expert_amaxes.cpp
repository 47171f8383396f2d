#include "model/expert_amaxes.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/buffer.h"

namespace dsv4::model {
namespace {

// `t` readable on the host: itself, or a host copy of a device tensor (kept in `copy`).
Result<TensorView> on_host(const TensorView& t, Tensor& copy) {
  if (t.device == Device::kCpu) return t;
  copy = Tensor::host(t.dtype, t.shape);
  DSV4_RETURN_IF_ERROR(copy_tensor(copy.view(), t));
  return copy.view();
}

// The largest |value| of rows [begin, end) of a contiguous f32 [R, C]; NaN when one is not
// finite.
float rows_amax(const TensorView& t, int64_t begin, int64_t end) {
  const int64_t width = t.size(1);
  const float* p = t.data_as<float>();
  float amax = 0.0f;
  for (int64_t i = begin * width; i < end * width; ++i) {
    if (!std::isfinite(p[i])) return std::nanf("");
    amax = std::max(amax, std::fabs(p[i]));
  }
  return amax;
}

}  // namespace

ExpertAmaxes::ExpertAmaxes(int64_t n_layers, int64_t n_experts)
    : n_layers_(n_layers), n_experts_(n_experts), amaxes_(n_layers * n_experts) {}

Status ExpertAmaxes::record(int64_t layer, const TensorView& offsets, const TensorView& rows,
                            const TensorView& hidden) {
  DSV4_CHECK(0 <= layer && layer < n_layers_ && offsets.dtype == DType::kI32 &&
                 offsets.numel() == n_experts_ + 1 && rows.dtype == DType::kF32 &&
                 hidden.dtype == DType::kF32 && rows.rank() == 2 && hidden.rank() == 2 &&
                 rows.size(0) == hidden.size(0) && rows.is_contiguous() && hidden.is_contiguous(),
             "expert amaxes: layer %lld of %lld, %lld offsets for %lld experts, rows %s, hidden %s",
             (long long)layer, (long long)n_layers_, (long long)offsets.numel(),
             (long long)n_experts_, rows.shape.to_string().c_str(),
             hidden.shape.to_string().c_str());
  Tensor offsets_copy, rows_copy, hidden_copy;
  DSV4_ASSIGN_OR_RETURN(TensorView bounds, on_host(offsets, offsets_copy));
  DSV4_ASSIGN_OR_RETURN(TensorView x, on_host(rows, rows_copy));
  DSV4_ASSIGN_OR_RETURN(TensorView h, on_host(hidden, hidden_copy));
  const int32_t* o = bounds.data_as<int32_t>();
  DSV4_CHECK(o[0] == 0 && o[n_experts_] == rows.size(0),
             "expert amaxes: offsets end at %d of %lld rows", o[n_experts_],
             (long long)rows.size(0));
  for (int64_t e = 0; e < n_experts_; ++e) {
    const float in = rows_amax(x, o[e], o[e + 1]), mid = rows_amax(h, o[e], o[e + 1]);
    if (std::isnan(in) || std::isnan(mid)) {
      return data_loss("layer " + std::to_string(layer) + " expert " + std::to_string(e) +
                       ": a non-finite " + (std::isnan(in) ? "gate-up" : "down") +
                       " input in the calibration forward");
    }
    ExpertAmax& a = amaxes_[layer * n_experts_ + e];
    a.gate_up = std::max(a.gate_up, in);
    a.down = std::max(a.down, mid);
    a.rows += o[e + 1] - o[e];
  }
  return ok_status();
}

}  // namespace dsv4::model

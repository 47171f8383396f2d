#include "model/expert_amaxes.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/buffer.h"

namespace dsv4::model {
namespace {

// The host copy of `t` (itself when it is on the host already).
Result<Tensor> on_host(const TensorView& t) {
  Tensor host = Tensor::host(t.dtype, t.shape);
  DSV4_RETURN_IF_ERROR(copy_tensor(host.view(), t));
  return host;
}

float row_block_amax(const Tensor& t, int64_t begin, int64_t end) {
  const int64_t width = t.shape()[1];
  const float* p = t.data_as<float>();
  float amax = 0.0f;
  for (int64_t i = begin * width; i < end * width; ++i) amax = std::max(amax, std::fabs(p[i]));
  return amax;
}

}  // namespace

ExpertAmaxes::ExpertAmaxes(int64_t n_layers, int64_t n_experts)
    : n_layers_(n_layers), n_experts_(n_experts), amaxes_(n_layers * n_experts) {}

Status ExpertAmaxes::record(int64_t layer, const TensorView& offsets, const TensorView& rows,
                            const TensorView& hidden) {
  if (layer < 0 || layer >= n_layers_ || offsets.numel() != n_experts_ + 1) {
    return invalid_argument("expert amaxes: layer " + std::to_string(layer) + " with " +
                            std::to_string(offsets.numel() - 1) + " experts, recording " +
                            std::to_string(n_layers_) + " layers of " + std::to_string(n_experts_));
  }
  DSV4_ASSIGN_OR_RETURN(Tensor bounds, on_host(offsets));
  DSV4_ASSIGN_OR_RETURN(Tensor x, on_host(rows));
  DSV4_ASSIGN_OR_RETURN(Tensor h, on_host(hidden));
  const int32_t* o = bounds.data_as<int32_t>();
  for (int64_t e = 0; e < n_experts_; ++e) {
    ExpertAmax& a = amaxes_[layer * n_experts_ + e];
    a.gate_up = std::max(a.gate_up, row_block_amax(x, o[e], o[e + 1]));
    a.down = std::max(a.down, row_block_amax(h, o[e], o[e + 1]));
    a.rows += o[e + 1] - o[e];
  }
  return ok_status();
}

}  // namespace dsv4::model

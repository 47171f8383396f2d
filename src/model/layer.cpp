#include "model/layer.h"

#include <utility>

#include "kernels/ops.h"
#include "model/attention.h"
#include "model/hyper_connections.h"
#include "model/scratch.h"

namespace dsv4::model {
Status layer_forward(const LayerInput& in, Tensor& streams, Tensor& spare) {
  const checkpoint::ModelConfig& config = *in.config;
  const checkpoint::LayerWeights& w = *in.weights;
  const float eps = static_cast<float>(config.rms_norm_eps);
  const int64_t n_rows = streams.shape()[0];
  const Device device = streams.device();
  DSV4_ASSIGN_OR_RETURN(Tensor x, scratch(DType::kF32, {n_rows, config.hidden_size}, device));
  DSV4_ASSIGN_OR_RETURN(Tensor block_out, scratch(DType::kF32, x.shape(), device));
  HcSite site;

  // Attention half.
  DSV4_RETURN_IF_ERROR(hc_pre(config, w.hc_attn, streams.view(), site, x.view()));
  DSV4_RETURN_IF_ERROR(kernels::rms_norm(x.view(), w.attn_norm.view(), eps, x.view()));
  DSV4_RETURN_IF_ERROR(
      attention_forward(config, in.layer, w.attn, x.view(), in.sequences, block_out.view()));
  DSV4_RETURN_IF_ERROR(hc_post(block_out.view(), streams.view(), site, spare.view()));
  std::swap(streams, spare);

  // FFN half.
  DSV4_RETURN_IF_ERROR(hc_pre(config, w.hc_ffn, streams.view(), site, x.view()));
  DSV4_RETURN_IF_ERROR(kernels::rms_norm(x.view(), w.ffn_norm.view(), eps, x.view()));
  DSV4_RETURN_IF_ERROR(moe_forward(config, in.layer, w.ffn, in.expert_mode, x.view(), in.tokens,
                                   block_out.view(), in.expert_amaxes));
  DSV4_RETURN_IF_ERROR(hc_post(block_out.view(), streams.view(), site, spare.view()));
  std::swap(streams, spare);
  return ok_status();
}

}  // namespace dsv4::model

#include "model/layer.h"

#include <string>
#include <utility>

#include "kernels/ops.h"
#include "model/attention.h"
#include "model/hyper_connections.h"
#include "model/linear.h"
#include "model/scratch.h"

namespace dsv4::model {
Status layer_forward(const LayerInput& in, Tensor& streams, Tensor& spare, Tensor* streams_normed) {
  const checkpoint::ModelConfig& config = *in.config;
  const checkpoint::LayerWeights& w = *in.weights;
  DSV4_CHECK(in.positions != nullptr, "layer_forward: layer %lld without its rows' positions",
             (long long)in.layer);
  const int64_t n_rows = streams.shape()[0];
  const Device device = streams.device();
  DSV4_ASSIGN_OR_RETURN(Tensor x, scratch(DType::kF32, {n_rows, config.hidden_size}, device));
  DSV4_ASSIGN_OR_RETURN(Tensor block_out, scratch(DType::kF32, x.shape(), device));
  HcSite site;

  // Attention half. Where wq_a and wkv run the FP8 GEMM, the site's norm quantizes x for both.
  {
    DSV4_ASSIGN_OR_RETURN(const Fp8Room x_fp8, fp8_room(n_rows, config.hidden_size, device,
                                                        in.numerics, {&w.attn.wq_a, &w.attn.wkv}));
    const TensorView normed_in = streams_normed != nullptr ? streams_normed->view() : TensorView{};
    DSV4_RETURN_IF_ERROR(hc_pre_norm(config, w.hc_attn, streams.view(), normed_in,
                                     w.attn_norm.view(), site, x.view(), x_fp8.view()));
    if (streams_normed != nullptr) *streams_normed = Tensor{};
    DSV4_RETURN_IF_ERROR(attention_forward(config, in.layer, w.attn, x.view(), in.sequences,
                                           *in.positions, block_out.view(), in.numerics,
                                           x_fp8.view()));
  }
  // The FFN site's input norm of the streams, made by the attention half's stream update. It
  // lives only from that update to the FFN site's mixes, as project_mixes' own norm did: held
  // across the attention or the experts it would add T·M·D f32 to their peak.
  const Shape normed_shape{n_rows, config.hc_mult * config.hidden_size};
  DSV4_ASSIGN_OR_RETURN(Tensor ffn_normed, scratch(DType::kF32, normed_shape, device));
  DSV4_RETURN_IF_ERROR(
      hc_post(config, block_out.view(), {}, streams.view(), site, spare.view(), ffn_normed.view()));
  std::swap(streams, spare);

  // FFN half; the site's norm quantizes x for the shared expert's w1 and w3 where they run FP8.
  DSV4_ASSIGN_OR_RETURN(const Fp8Room x_fp8,
                        fp8_room(n_rows, config.hidden_size, device, in.numerics,
                                 {&w.ffn.shared_expert.w1, &w.ffn.shared_expert.w3}));
  DSV4_RETURN_IF_ERROR(hc_pre_norm(config, w.hc_ffn, streams.view(), ffn_normed.view(),
                                   w.ffn_norm.view(), site, x.view(), x_fp8.view()));
  ffn_normed = Tensor{};
  // The routed and shared experts' halves are summed by hc_post, not by an add of their own.
  DSV4_ASSIGN_OR_RETURN(Tensor shared_out, scratch(DType::kF32, x.shape(), device));
  DSV4_RETURN_IF_ERROR(moe_forward_parts(config, in.layer, w.ffn, in.expert_mode, x.view(),
                                         in.tokens, block_out.view(), shared_out.view(),
                                         in.expert_amaxes, in.placement, in.numerics,
                                         x_fp8.view()));
  // With streams_normed, the next layer's first mixes' input norm comes in the same launch.
  if (streams_normed != nullptr) {
    DSV4_ASSIGN_OR_RETURN(*streams_normed, scratch(DType::kF32, normed_shape, device));
  }
  DSV4_RETURN_IF_ERROR(hc_post(config, block_out.view(), shared_out.view(), streams.view(), site,
                               spare.view(),
                               streams_normed != nullptr ? streams_normed->view() : TensorView{}));
  std::swap(streams, spare);
  return ok_status();
}

Status check_token_ids(std::span<const int64_t> ids, int64_t vocab_size) {
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size) {
      return invalid_argument("token id " + std::to_string(id) + " outside the vocabulary [0, " +
                              std::to_string(vocab_size) + ")");
    }
  }
  return ok_status();
}

Result<Tensor> embed_streams(const checkpoint::ModelConfig& config, const TensorView& embed,
                             const TensorView& tokens) {
  const int64_t n_rows = tokens.numel();
  DSV4_ASSIGN_OR_RETURN(Tensor x,
                        scratch(DType::kF32, {n_rows, config.hidden_size}, tokens.device));
  DSV4_RETURN_IF_ERROR(kernels::embedding(embed, tokens, x.view()));
  DSV4_ASSIGN_OR_RETURN(
      Tensor streams,
      scratch(DType::kF32, {n_rows, config.hc_mult, config.hidden_size}, tokens.device));
  DSV4_RETURN_IF_ERROR(kernels::hc_repeat(x.view(), streams.view()));
  return streams;
}

Result<Tensor> final_hidden(const checkpoint::ModelWeights& weights, const TensorView& streams,
                            const TensorView& streams_normed) {
  return final_hidden(weights.config, weights.hc_head, weights.norm.view(), streams,
                      streams_normed);
}

Result<Tensor> final_hidden(const checkpoint::ModelConfig& c,
                            const checkpoint::HyperConnectionWeights& hc_head_weights,
                            const TensorView& norm, const TensorView& streams,
                            const TensorView& streams_normed) {
  DSV4_ASSIGN_OR_RETURN(Tensor hidden,
                        scratch(DType::kF32, {streams.size(0), c.hidden_size}, streams.device));
  DSV4_RETURN_IF_ERROR(hc_head(c, hc_head_weights, streams, hidden.view(), streams_normed));
  DSV4_RETURN_IF_ERROR(
      kernels::rms_norm(hidden.view(), norm, static_cast<float>(c.rms_norm_eps), hidden.view()));
  return hidden;
}

}  // namespace dsv4::model

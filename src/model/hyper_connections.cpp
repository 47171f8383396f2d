#include "model/hyper_connections.h"

#include "model/scratch.h"

namespace dsv4::model {
namespace {

// mixes [T, n_mix] = fn · (streams flattened to [T, M·D], RMS-normalised without a weight):
// the input_norm + F.linear of both transformers modules.
Result<Tensor> project_mixes(const checkpoint::ModelConfig& config, const TensorView& fn,
                             const TensorView& streams) {
  const int64_t n_tokens = streams.size(0);
  const TensorView flat = streams.reshaped({n_tokens, streams.numel() / n_tokens});
  DSV4_ASSIGN_OR_RETURN(Tensor normed, scratch(DType::kF32, flat.shape, streams.device));
  DSV4_RETURN_IF_ERROR(kernels::rms_norm(flat, TensorView{},
                                         static_cast<float>(config.rms_norm_eps), normed.view()));
  DSV4_ASSIGN_OR_RETURN(Tensor mixes, scratch(DType::kF32, {n_tokens, fn.size(0)}, streams.device));
  DSV4_RETURN_IF_ERROR(kernels::linear(normed.view(), fn, mixes.view()));
  return mixes;
}

}  // namespace

Status hc_pre(const checkpoint::ModelConfig& config, const checkpoint::HyperConnectionWeights& w,
              const TensorView& streams, HcSite& site, const TensorView& collapsed) {
  const int64_t n_tokens = streams.size(0), m = config.hc_mult;
  DSV4_ASSIGN_OR_RETURN(Tensor mixes, project_mixes(config, w.fn.view(), streams));
  DSV4_ASSIGN_OR_RETURN(site.pre, scratch(DType::kF32, {n_tokens, m}, streams.device));
  DSV4_ASSIGN_OR_RETURN(site.post, scratch(DType::kF32, {n_tokens, m}, streams.device));
  DSV4_ASSIGN_OR_RETURN(site.comb, scratch(DType::kF32, {n_tokens, m, m}, streams.device));
  DSV4_RETURN_IF_ERROR(kernels::hc_split_sinkhorn(mixes.view(), w.scale.view(), w.base.view(),
                                                  config.hc_sinkhorn_iters,
                                                  static_cast<float>(config.hc_eps), site.view()));
  // The collapse weighs the raw streams, not the normalised ones.
  return kernels::hc_collapse(streams, site.pre.view(), collapsed);
}

Status hc_post(const TensorView& block_out, const TensorView& residual, const HcSite& site,
               const TensorView& out) {
  return kernels::hc_expand(block_out, residual, site.post.view(), site.comb.view(), out);
}

Status hc_head(const checkpoint::ModelConfig& config, const checkpoint::HyperConnectionWeights& w,
               const TensorView& streams, const TensorView& out) {
  DSV4_ASSIGN_OR_RETURN(Tensor mixes, project_mixes(config, w.fn.view(), streams));
  DSV4_ASSIGN_OR_RETURN(Tensor pre, scratch(DType::kF32, mixes.shape(), streams.device));
  DSV4_RETURN_IF_ERROR(kernels::hc_head_weights(mixes.view(), w.scale.view(), w.base.view(),
                                                static_cast<float>(config.hc_eps), pre.view()));
  return kernels::hc_collapse(streams, pre.view(), out);
}

}  // namespace dsv4::model

#include "model/hyper_connections.h"

#include "model/scratch.h"

namespace dsv4::model {
namespace {

// mixes [T, n_mix] = fn · (streams flattened to [T, M·D], RMS-normalised without a weight):
// the input_norm + F.linear of both transformers modules. `normed` holds that norm already when
// the previous site's hc_post made it (else empty).
Result<Tensor> project_mixes(const checkpoint::ModelConfig& config, const TensorView& fn,
                             const TensorView& streams, const TensorView& normed = {}) {
  const int64_t n_tokens = streams.size(0);
  DSV4_ASSIGN_OR_RETURN(Tensor mixes, scratch(DType::kF32, {n_tokens, fn.size(0)}, streams.device));
  if (normed.data != nullptr) {
    DSV4_RETURN_IF_ERROR(kernels::linear(normed, fn, mixes.view()));
    return mixes;
  }
  const TensorView flat = streams.reshaped({n_tokens, streams.numel() / n_tokens});
  DSV4_ASSIGN_OR_RETURN(Tensor own, scratch(DType::kF32, flat.shape, streams.device));
  DSV4_RETURN_IF_ERROR(
      kernels::rms_norm(flat, TensorView{}, static_cast<float>(config.rms_norm_eps), own.view()));
  DSV4_RETURN_IF_ERROR(kernels::linear(own.view(), fn, mixes.view()));
  return mixes;
}

Status allocate_site(const checkpoint::ModelConfig& config, int64_t n_tokens, Device device,
                     HcSite& site) {
  const int64_t m = config.hc_mult;
  DSV4_ASSIGN_OR_RETURN(site.pre, scratch(DType::kF32, {n_tokens, m}, device));
  DSV4_ASSIGN_OR_RETURN(site.post, scratch(DType::kF32, {n_tokens, m}, device));
  DSV4_ASSIGN_OR_RETURN(site.comb, scratch(DType::kF32, {n_tokens, m, m}, device));
  return ok_status();
}

}  // namespace

Status hc_pre_norm(const checkpoint::ModelConfig& config,
                   const checkpoint::HyperConnectionWeights& w, const TensorView& streams,
                   const TensorView& streams_normed, const TensorView& block_norm, HcSite& site,
                   const TensorView& x, const kernels::Fp8Activation& x_fp8) {
  DSV4_ASSIGN_OR_RETURN(Tensor mixes, project_mixes(config, w.fn.view(), streams, streams_normed));
  DSV4_RETURN_IF_ERROR(allocate_site(config, streams.size(0), streams.device, site));
  const auto eps = static_cast<float>(config.rms_norm_eps);
  const kernels::HcPreNormParams params{mixes.view(),
                                        w.scale.view(),
                                        w.base.view(),
                                        config.hc_sinkhorn_iters,
                                        static_cast<float>(config.hc_eps),
                                        site.view(),
                                        streams,
                                        block_norm,
                                        eps,
                                        x};
  if (x_fp8.values.data == nullptr) return kernels::hc_pre_norm(params);
  return kernels::hc_pre_norm_fp8(params, x_fp8);
}

Status hc_post(const checkpoint::ModelConfig& config, const TensorView& block_out,
               const TensorView& block_addend, const TensorView& residual, const HcSite& site,
               const TensorView& out, const TensorView& normed) {
  if (normed.data == nullptr) {
    return kernels::hc_expand(block_out, block_addend, residual, site.post.view(), site.comb.view(),
                              out);
  }
  return kernels::hc_expand_norm(block_out, block_addend, residual, site.post.view(),
                                 site.comb.view(), static_cast<float>(config.rms_norm_eps), out,
                                 normed);
}

Status hc_head(const checkpoint::ModelConfig& config, const checkpoint::HyperConnectionWeights& w,
               const TensorView& streams, const TensorView& out, const TensorView& streams_normed) {
  DSV4_ASSIGN_OR_RETURN(Tensor mixes, project_mixes(config, w.fn.view(), streams, streams_normed));
  DSV4_ASSIGN_OR_RETURN(Tensor pre, scratch(DType::kF32, mixes.shape(), streams.device));
  DSV4_RETURN_IF_ERROR(kernels::hc_head_weights(mixes.view(), w.scale.view(), w.base.view(),
                                                static_cast<float>(config.hc_eps), pre.view()));
  return kernels::hc_collapse(streams, pre.view(), out);
}

}  // namespace dsv4::model

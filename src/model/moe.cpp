#include "model/moe.h"

#include <string>

#include "kernels/ops.h"
#include "model/linear.h"
#include "model/scratch.h"

namespace dsv4::model {
namespace {

using checkpoint::ModelConfig;
using checkpoint::MoeWeights;

// weights [T, K] and ids [T, K] of the router; hash layers take their experts from tid2eid.
Status route(const ModelConfig& config, int64_t layer, const MoeWeights& w, const TensorView& x,
             const TensorView& tokens, const kernels::MoeRouting& routing) {
  const int64_t n_tokens = x.size(0), k = config.n_expert_used;
  DSV4_ASSIGN_OR_RETURN(Tensor logits,
                        scratch(DType::kF32, {n_tokens, config.n_routed_experts}, x.device));
  // The router runs in f32 (transformers keeps the gate in the activation dtype, f32 here).
  // The weights are always renormalised: transformers' routers ignore norm_topk_prob.
  DSV4_RETURN_IF_ERROR(kernels::linear(x, w.gate.view(), logits.view()));
  const auto scale = static_cast<float>(config.routed_scaling_factor);
  if (config.schedule(layer).routing == checkpoint::RoutingType::kHash) {
    DSV4_ASSIGN_OR_RETURN(Tensor hash_ids, scratch(DType::kI64, {n_tokens, k}, x.device));
    DSV4_RETURN_IF_ERROR(kernels::embedding(w.tid2eid.view(), tokens, hash_ids.view()));
    return kernels::moe_route(logits.view(), TensorView{}, hash_ids.view(), scale, routing);
  }
  return kernels::moe_route(logits.view(), w.bias.view(), TensorView{}, scale, routing);
}

// NVFP4 routed experts: the fused MoE op (router included) without its shared expert, which
// stays in the checkpoint's precision (shared_expert below), run where `placement` puts it.
Status nvfp4_experts(const ModelConfig& config, int64_t layer, const MoeWeights& w, ExpertMode mode,
                     ExpertPlacement* placement, const TensorView& x, const TensorView& tokens,
                     const TensorView& out) {
  const bool hash = config.schedule(layer).routing == checkpoint::RoutingType::kHash;
  // W4A4 stages with the checkpoint's calibrated scales when it has them (the loader's
  // RoutedExpertWeights::w13_input_scale), else dynamic ones.
  kernels::MoeWeightsView view{w.gate.view(),
                               hash ? TensorView{} : w.bias.view(),
                               hash ? w.tid2eid.view() : TensorView{},
                               w.experts.w13_nvfp4->view(),
                               w.experts.w2_nvfp4->view(),
                               {},
                               {},
                               w.experts.w13_input_scale.view(),
                               w.experts.w2_input_scale.view()};
  const kernels::MoeConfig cfg{static_cast<int>(config.n_expert_used),
                               static_cast<float>(config.routed_scaling_factor),
                               static_cast<float>(config.swiglu_limit), mode};
  const RoutedExpertsCall call{layer, &w.experts, view, cfg, x, tokens, out};
  return placement ? placement->run(call) : run_in_place(call);
}

// Dense routed experts, composed from the plain ops: route, group, gather, gate_up, SwiGLU, down,
// combine.
Status dense_experts(const ModelConfig& config, int64_t layer, const MoeWeights& w,
                     const TensorView& x, const TensorView& tokens, const TensorView& out,
                     ExpertAmaxes* amaxes) {
  const int64_t n_tokens = x.size(0), k = config.n_expert_used;
  const int64_t n_rows = n_tokens * k, f = config.moe_intermediate_size;
  const Device device = x.device;
  DSV4_ASSIGN_OR_RETURN(Tensor routing_weights, scratch(DType::kF32, {n_tokens, k}, device));
  DSV4_ASSIGN_OR_RETURN(Tensor ids, scratch(DType::kI32, {n_tokens, k}, device));
  const kernels::MoeRouting routing{routing_weights.view(), ids.view()};
  DSV4_RETURN_IF_ERROR(route(config, layer, w, x, tokens, routing));
  DSV4_ASSIGN_OR_RETURN(Tensor order, scratch(DType::kI32, {n_rows}, device));
  DSV4_ASSIGN_OR_RETURN(Tensor offsets,
                        scratch(DType::kI32, {config.n_routed_experts + 1}, device));
  DSV4_RETURN_IF_ERROR(kernels::moe_group(routing.ids, order.view(), offsets.view()));
  DSV4_ASSIGN_OR_RETURN(Tensor rows, scratch(DType::kF32, {n_rows, x.size(1)}, device));
  DSV4_RETURN_IF_ERROR(kernels::moe_gather(x, order.view(), rows.view()));
  DSV4_ASSIGN_OR_RETURN(Tensor gate_up, scratch(DType::kF32, {n_rows, 2 * f}, device));
  DSV4_RETURN_IF_ERROR(
      kernels::grouped_linear(rows.view(), w.experts.w13.view(), offsets.view(), gate_up.view()));
  DSV4_ASSIGN_OR_RETURN(Tensor hidden, scratch(DType::kF32, {n_rows, f}, device));
  DSV4_RETURN_IF_ERROR(
      kernels::swiglu(gate_up.view(), static_cast<float>(config.swiglu_limit), hidden.view()));
  if (amaxes != nullptr) {
    DSV4_RETURN_IF_ERROR(amaxes->record(layer, offsets.view(), rows.view(), hidden.view()));
  }
  DSV4_RETURN_IF_ERROR(
      kernels::grouped_linear(hidden.view(), w.experts.w2.view(), offsets.view(), rows.view()));
  // transformers applies the routing weight to each expert's output (after w2); the official
  // reference applies it before w2 (doc §2.6 step 5). Linear, so equal up to rounding;
  // transformers wins.
  return kernels::moe_combine(rows.view(), order.view(), routing.weights, out);
}

// out [T, D] = w2 · swiglu(w1 x | w3 x): DeepseekV4MLP, with the same clamp as the experts. The
// SwiGLU quantizes its output for w2 where w2 runs the FP8 GEMM.
Status shared_expert(const ModelConfig& config, const checkpoint::DenseExpertWeights& w,
                     const LinearInput& x, const TensorView& out, Numerics numerics) {
  const int64_t n_tokens = x.x.size(0), f = config.moe_intermediate_size;
  const Device device = x.x.device;
  DSV4_ASSIGN_OR_RETURN(Tensor gate_up, scratch(DType::kF32, {n_tokens, 2 * f}, device));
  DSV4_RETURN_IF_ERROR(linear_pair(x, {w.w1, columns(gate_up.view(), 0, f)},
                                   {w.w3, columns(gate_up.view(), f, 2 * f)}, numerics));
  DSV4_ASSIGN_OR_RETURN(Tensor hidden, scratch(DType::kF32, {n_tokens, f}, device));
  DSV4_ASSIGN_OR_RETURN(const Fp8Room hidden_fp8, fp8_room(n_tokens, f, device, numerics, {&w.w2}));
  const auto limit = static_cast<float>(config.swiglu_limit);
  if (hidden_fp8.empty()) {
    DSV4_RETURN_IF_ERROR(kernels::swiglu(gate_up.view(), limit, hidden.view()));
  } else {
    DSV4_RETURN_IF_ERROR(
        kernels::swiglu_fp8(gate_up.view(), limit, hidden.view(), hidden_fp8.view()));
  }
  return linear(LinearInput(hidden.view(), hidden_fp8.view()), w.w2, out, numerics);
}

// The routed half: router, routed experts and their weighted sum into out.
Status routed_experts(const ModelConfig& config, int64_t layer, const MoeWeights& weights,
                      ExpertMode mode, const TensorView& x, const TensorView& tokens,
                      const TensorView& out, ExpertAmaxes* amaxes, ExpertPlacement* placement) {
  if (!weights.experts.is_nvfp4()) {
    return dense_experts(config, layer, weights, x, tokens, out, amaxes);
  }
  if (amaxes != nullptr) {
    return invalid_argument("layer " + std::to_string(layer) +
                            ": recording expert input amaxes needs dense (bf16/f32) experts");
  }
  return nvfp4_experts(config, layer, weights, mode, placement, x, tokens, out);
}

}  // namespace

Status moe_forward_parts(const ModelConfig& config, int64_t layer, const MoeWeights& weights,
                         ExpertMode mode, const TensorView& x, const TensorView& tokens,
                         const TensorView& routed_out, const TensorView& shared_out,
                         ExpertAmaxes* amaxes, ExpertPlacement* placement, Numerics numerics,
                         const kernels::Fp8Activation& x_fp8) {
  // The shared expert needs no routing, so it runs beside the router and the routed experts
  // (a second stream on a GPU): at a decode step each half is a chain of small launches (the
  // router's logits and selection, then the expert kernels; the shared expert's linears and
  // SwiGLU), and the layer waits for the longer chain instead of both.
  return kernels::run_beside(
      x.device,
      [&] {
        return shared_expert(config, weights.shared_expert, LinearInput(x, x_fp8), shared_out,
                             numerics);
      },
      [&] {
        return routed_experts(config, layer, weights, mode, x, tokens, routed_out, amaxes,
                              placement);
      });
}

Status moe_forward(const ModelConfig& config, int64_t layer, const MoeWeights& weights,
                   ExpertMode mode, const TensorView& x, const TensorView& tokens,
                   const TensorView& out, ExpertAmaxes* amaxes, ExpertPlacement* placement,
                   Numerics numerics, const kernels::Fp8Activation& x_fp8) {
  DSV4_ASSIGN_OR_RETURN(Tensor shared, scratch(DType::kF32, out.shape, x.device));
  DSV4_RETURN_IF_ERROR(moe_forward_parts(config, layer, weights, mode, x, tokens, out,
                                         shared.view(), amaxes, placement, numerics, x_fp8));
  return kernels::add(out, shared.view(), out);
}

}  // namespace dsv4::model

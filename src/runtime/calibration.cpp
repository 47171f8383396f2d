#include "runtime/calibration.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/loader.h"
#include "format/nvfp4.h"
#include "model/layerwise_forward.h"

namespace dsv4::runtime {
namespace {

// One layer's scales of one input (gate-up or down) from its experts' amaxes; an expert with no
// scale of its own (no rows, or only zeros) takes the largest of the others.
Result<std::vector<float>> layer_scales(const model::ExpertAmaxes& amaxes, int64_t layer,
                                        float model::ExpertAmax::*input, const char* name) {
  std::vector<float> scales(amaxes.n_experts(), 0.0f);
  float largest = 0.0f;
  for (int64_t e = 0; e < amaxes.n_experts(); ++e) {
    const model::ExpertAmax& a = amaxes.at(layer, e);
    if (a.rows > 0) scales[e] = a.*input / format::kNvfp4Range;
    largest = std::max(largest, scales[e]);
  }
  if (!(largest > 0.0f)) {
    return invalid_argument("calibration: layer " + std::to_string(layer) +
                            "'s routed experts saw only zeros at their " + name + " input");
  }
  for (float& scale : scales) {
    if (scale == 0.0f) scale = largest;
  }
  return scales;
}

}  // namespace

Result<ExpertCalibration> input_scales_of(const model::ExpertAmaxes& amaxes) {
  ExpertCalibration out;
  for (int64_t layer = 0; layer < amaxes.n_layers(); ++layer) {
    DSV4_ASSIGN_OR_RETURN(std::vector<float> gate_up,
                          layer_scales(amaxes, layer, &model::ExpertAmax::gate_up, "gate-up"));
    DSV4_ASSIGN_OR_RETURN(std::vector<float> down,
                          layer_scales(amaxes, layer, &model::ExpertAmax::down, "down"));
    for (int64_t e = 0; e < amaxes.n_experts(); ++e) {
      out.n_unreached += amaxes.at(layer, e).rows == 0 ? 1 : 0;
    }
    out.scales.gate_up.push_back(std::move(gate_up));
    out.scales.down.push_back(std::move(down));
  }
  return out;
}

Result<ExpertCalibration> calibrate_expert_inputs(const std::string& model_dir,
                                                  std::span<const int64_t> tokens) {
  if (tokens.empty()) return invalid_argument("calibration: no tokens");
  // The loader decodes the globals, then layer after layer: each runs as soon as it is decoded
  // and is dropped, so memory holds the embedding, the head and one layer.
  std::optional<model::ExpertAmaxes> amaxes;
  std::optional<model::LayerwiseForward> forward;
  checkpoint::LoadOptions options;
  options.before_decode = [&model_dir](const checkpoint::LoadPlan& plan) -> Status {
    if (!plan.first_problem.empty()) {
      return data_loss(model_dir + ": checkpoint does not bind cleanly: " + plan.first_problem);
    }
    if (plan.packed_expert_bytes > 0) {
      return invalid_argument(model_dir +
                              ": its routed experts are stored in FP4; a calibration "
                              "pass needs dense (bf16/f32) experts");
    }
    return ok_status();
  };
  options.on_layer_loaded = [&](checkpoint::ModelWeights& w, int64_t layer) -> Status {
    if (layer < 0) {
      amaxes.emplace(w.config.n_layer, w.config.n_routed_experts);
      DSV4_ASSIGN_OR_RETURN(
          forward, model::LayerwiseForward::start(w.config, w.embed.view(), tokens, &*amaxes));
      w.embed = Tensor();  // the streams are made; no logits are asked for
      w.head = Tensor();
      return ok_status();
    }
    if (!forward) return internal_error("calibration: layer decoded before the globals");
    if (layer >= w.config.n_layer) {  // an MTP block: not part of the trunk's pass
      w.mtp[static_cast<size_t>(layer - w.config.n_layer)] = checkpoint::MtpWeights{};
      return ok_status();
    }
    DSV4_RETURN_IF_ERROR(forward->run_layer(layer, w.layers[layer]));
    w.layers[layer] = checkpoint::LayerWeights{};
    return ok_status();
  };
  DSV4_ASSIGN_OR_RETURN(checkpoint::LoadedModel loaded, checkpoint::load_model(model_dir, options));
  if (!loaded.report.clean()) {
    return data_loss(model_dir +
                     ": checkpoint does not bind cleanly: " + loaded.report.first_problem());
  }
  if (!forward || forward->next_layer() != loaded.weights.config.n_layer) {
    return internal_error("calibration: the loader did not hand over every layer");
  }
  DSV4_ASSIGN_OR_RETURN(ExpertCalibration calibration, input_scales_of(*amaxes));
  calibration.n_tokens = static_cast<int64_t>(tokens.size());
  return calibration;
}

}  // namespace dsv4::runtime

// The seam between the model's math and the runtime's placement of the routed experts. A MoE
// layer hands one step's routed-expert call (moe_ffn's operands as plain views of the
// checkpoint's weights, and the activations) to an ExpertPlacement, which decides where it runs
// and from which memory: in place (run_in_place, what a model without a placement does), an
// offloaded layer's experts copied to the device first (runtime/offloaded_experts.h), or the
// experts sharded over ranks (runtime/expert_parallel.h). The model never learns which.
//
// Dimension letters: T tokens, D model width.
#pragma once

#include <cstdint>

#include "checkpoint/weights.h"
#include "dsv4/status.h"
#include "kernels/ops.h"

namespace dsv4::model {

// One layer's routed NVFP4 experts for one step; the shared expert is left out (weights has
// none), the model adds its own.
struct RoutedExpertsCall {
  int64_t layer = 0;
  const checkpoint::RoutedExpertWeights* experts = nullptr;  // the stacks and where they live
  kernels::MoeWeightsView weights;                           // router + routed stacks
  kernels::MoeConfig config;
  TensorView x;       // f32 [T, D]  the ffn-normed block input
  TensorView tokens;  // i64 [T]     token ids (hash routing)
  TensorView y;       // f32 [T, D]  the routed sum
};

class ExpertPlacement {
 public:
  virtual ~ExpertPlacement() = default;
  // y = moe_ffn(x) on call.weights, wherever and however the placement runs it.
  virtual Status run(const RoutedExpertsCall& call) = 0;
};

// moe_ffn on the weights where they are (a step's workspace from model/scratch.h).
Status run_in_place(const RoutedExpertsCall& call);

}  // namespace dsv4::model

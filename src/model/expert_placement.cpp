#include "model/expert_placement.h"

#include "model/scratch.h"

namespace dsv4::model {

Status run_in_place(const RoutedExpertsCall& call) {
  const int64_t bytes = kernels::moe_ffn_workspace_bytes(call.x.size(0), call.weights, call.config);
  Tensor workspace;
  if (call.x.device == Device::kCuda) {
    DSV4_ASSIGN_OR_RETURN(workspace, scratch(DType::kU8, {bytes}, call.x.device));
  }
  return kernels::moe_ffn(call.x, call.tokens, call.weights, call.config, workspace.view(), call.y);
}

}  // namespace dsv4::model

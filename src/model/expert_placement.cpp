#include "model/expert_placement.h"

#include <string>

#include "model/scratch.h"

namespace dsv4::model {

Status run_in_place(const RoutedExpertsCall& call) {
  // Stacks without codes: freed once the expert-parallel ranks held their copies
  // (runtime/expert_shards.h), which only their placement reads.
  if (call.experts != nullptr && call.experts->is_nvfp4() &&
      call.weights.w13.packed.data == nullptr) {
    return internal_error("layer " + std::to_string(call.layer) +
                          "'s routed experts are held by the expert-parallel ranks only: "
                          "it runs through their placement, not in place");
  }
  const int64_t bytes = kernels::moe_ffn_workspace_bytes(call.x.size(0), call.weights, call.config);
  Tensor workspace;
  if (call.x.device == Device::kCuda) {
    DSV4_ASSIGN_OR_RETURN(workspace, scratch(DType::kU8, {bytes}, call.x.device));
  }
  return kernels::moe_ffn(call.x, call.tokens, call.weights, call.config, workspace.view(), call.y);
}

}  // namespace dsv4::model

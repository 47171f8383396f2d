// The single-device placement of the routed experts (model/expert_placement.h): a layer whose
// experts are on the device runs them in place; a layer whose NVFP4 stacks expert offload left
// in mapped host memory (checkpoint/expert_offload.h) has them copied to device scratch first,
// so its kernels read HBM instead of PCIe.
#pragma once

#include <vector>

#include "model/expert_placement.h"

namespace dsv4::runtime {

// `call`'s routed experts where the device kernels read them well: `view` is call.weights with an
// offloaded layer's stacks replaced by device scratch (kept alive by `keep`) that the copy
// engines fill now, or that the op fills with the experts it touches below a step size; a layer
// on the device is left as it is.
Status experts_on_device(const model::RoutedExpertsCall& call, kernels::MoeWeightsView& view,
                         std::vector<Tensor>& keep);

class OffloadedExperts final : public model::ExpertPlacement {
 public:
  Status run(const model::RoutedExpertsCall& call) override;
};

}  // namespace dsv4::runtime

// The single-device placement of the routed experts (model/expert_placement.h): a layer whose
// experts are on the device runs them in place; a layer whose NVFP4 stacks expert offload left
// in mapped host memory (checkpoint/expert_offload.h) has them copied to device scratch first,
// so its kernels read HBM instead of PCIe.
#pragma once

#include "model/expert_placement.h"

namespace dsv4::runtime {

class OffloadedExperts final : public model::ExpertPlacement {
 public:
  Status run(const model::RoutedExpertsCall& call) override;
};

}  // namespace dsv4::runtime

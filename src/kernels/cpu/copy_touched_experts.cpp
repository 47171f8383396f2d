// Expert offload's copy of the routed experts a step touches (kernels/ops.h
// copy_touched_experts) on the host: each listed expert's slice of the four regions, one
// memcpy each.
//
// Dimension letters: E routed experts.
#include <cstring>

#include "kernels/contracts.h"
#include "kernels/cpu/cpu_ops.h"

namespace dsv4::kernels::cpu {

void copy_touched_experts(const TensorView& active, const ExpertBulkCopies& from,
                          const ExpertBulkCopies& to) {
  const TouchedExpertsOperands op = touched_experts_operands(active, from, to);
  const int32_t n_active = op.active[op.n_experts + 1];
  DSV4_CHECK(n_active >= 0 && n_active <= op.n_experts + 1,
             "copy_touched_experts: %d active groups of E + 1 = %lld", n_active,
             (long long)op.n_experts + 1);
  for (int32_t a = 0; a < n_active; ++a) {
    const int64_t expert = op.active[a];
    if (expert < 0 || expert >= op.n_experts) continue;  // the shared expert's group
    for (int r = 0; r < kExpertBulkRegions; ++r) {
      const int64_t bytes = op.expert_bytes[r];
      std::memcpy(op.to[r] + expert * bytes, op.from[r] + expert * bytes, bytes);
    }
  }
}

}  // namespace dsv4::kernels::cpu

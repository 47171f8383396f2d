// Running the dense linear (launch.cu): the plan for a call on the current device, and the launch
// of a plan's kernel on op_stream(). Plain C++: ops/linear.cu, the tests and linear_bench call it.
#pragma once

#include <cstdint>

#include "kernels/contracts.h"
#include "kernels/cuda/gemm/dense/plan.h"

namespace dsv4::kernels::cuda {

// plan_dense for this device's multiprocessors.
DensePlan plan_for(const LinearOperands& o, int64_t n_groups);

// y = x · wᵀ (n_groups block-diagonal groups) by the plan's kernel.
void launch_dense(const LinearOperands& o, int64_t n_groups, const DensePlan& plan);

}  // namespace dsv4::kernels::cuda

// Host side of the dense linear: the plan on this device, and the launch of its kernel.
#include "kernels/cuda/gemm/dense/launch.h"

#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/gemm/dense/kernels.h"

namespace dsv4::kernels::cuda {

DensePlan plan_for(const LinearOperands& o, int64_t n_groups) {
  return plan_dense(o, n_groups, sm_count());
}

void launch_dense(const LinearOperands& o, int64_t n_groups, const DensePlan& plan) {
  switch (plan.kernel) {
    case DenseKernel::kNone: return;
    case DenseKernel::kTensorCores: return linear_tensor_cores(o, n_groups);
    case DenseKernel::kFewRowsTensorCores:
      return linear_few_rows_tensor_cores(o, n_groups, plan.warps);
    case DenseKernel::kTiled:
    case DenseKernel::kFewRows: return linear_cuda_cores(o, n_groups, plan);
    case DenseKernel::kNarrow: return linear_narrow(o, plan);
  }
}

}  // namespace dsv4::kernels::cuda

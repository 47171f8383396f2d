// A launch on op_stream() whose blocks form thread block clusters of `cluster` blocks along x
// (sm_90): the blocks of a cluster run at once and read each other's shared memory.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"

namespace dsv4::kernels::cuda {

template <typename... Params, typename... Args>
void launch_clusters(void (*kernel)(Params...), dim3 grid, dim3 block, int cluster,
                     Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(cluster);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.stream = op_stream();
  config.attrs = &attribute;
  config.numAttrs = 1;
  DSV4_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace dsv4::kernels::cuda

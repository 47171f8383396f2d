// Programmatic dependent launch for the decode chain (route → experts → combine). At one token
// each kernel runs a few microseconds, so the gap between two launches (the next grid's launch
// and prologue) is a visible share of the layer. A kernel launched with launch_pdl may start
// while its predecessor in the stream still runs; it must call pdl_wait() before it reads
// anything the predecessor writes (it waits for the predecessor's completion and its memory).
// Work that needs no upstream data (the shared expert's weights into L2) goes before the wait.
// pdl_trigger() lets the next grid launch early; without it that happens as blocks exit. Both
// are no-ops when the kernel was launched normally. Works under stream capture (graph edges).
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"

namespace dsv4::kernels::cuda::moe {

__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void pdl_trigger() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

template <typename... Params, typename... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  DSV4_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace dsv4::kernels::cuda::moe

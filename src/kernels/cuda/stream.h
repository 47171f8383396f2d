// The stream every dsv4 CUDA op launches on: the per-thread default stream. Unlike the legacy
// stream 0 it can be captured into a CUDA graph (decode steps, benchmarks), and it still
// orders itself with legacy-stream work (cudaMemcpy, other ops) as a blocking stream.
#pragma once

#include <cuda_runtime.h>

namespace dsv4::kernels::cuda {

inline cudaStream_t op_stream() { return cudaStreamPerThread; }

}  // namespace dsv4::kernels::cuda

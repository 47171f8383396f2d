// The stream every dsv4 CUDA op launches on: the thread's current stream (base/device_stream.h),
// the per-thread default stream except in a side chain of kernels::run_beside. Unlike the
// legacy stream 0 it can be captured into a CUDA graph (decode steps, benchmarks), and it still
// orders itself with legacy-stream work (cudaMemcpy, other ops) as a blocking stream.
#pragma once

#include <cuda_runtime.h>

#include "base/device_stream.h"

namespace dsv4::kernels::cuda {

inline cudaStream_t op_stream() { return static_cast<cudaStream_t>(device_stream()); }

}  // namespace dsv4::kernels::cuda

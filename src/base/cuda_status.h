// A CUDA runtime result as a Status, for base's CUDA-only sources. Out of memory is the one
// failure a caller can act on (refuse the request, run without a graph), so it is told apart.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "dsv4/status.h"

namespace dsv4 {

inline Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return ok_status();
  const std::string message = std::string(what) + ": " + cudaGetErrorString(err);
  if (err == cudaErrorMemoryAllocation) return resource_exhausted(message);
  return internal_error(message);
}

}  // namespace dsv4

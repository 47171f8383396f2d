// Device memory for the length of one op call (a split's partial results, a staging copy),
// from the stream-ordered pool: capturable into a CUDA graph, and kept by the pool between
// calls instead of mapped again each time.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>

#include "dsv4/status.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"

namespace dsv4::kernels::cuda {

// The default pool returns freed memory to the driver at every synchronisation unless told to
// keep it; re-mapping a large scratch on each call would cost more than the GEMM.
inline void keep_pool_memory() {
  static const bool kept = [] {
    int device = 0;
    DSV4_CUDA_CHECK(cudaGetDevice(&device));
    cudaMemPool_t pool;
    DSV4_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
    uint64_t threshold = UINT64_MAX;
    DSV4_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    return true;
  }();
  (void)kept;
}

// Device memory for the length of one call, released in stream order (in a side chain of
// kernels::run_beside, after its join: base/device_stream.h). Its allocation can fail where a
// request's caches took the device's memory, which the world can do and a bug cannot, so it is a
// Result (resource_exhausted for out of memory, which the server answers 503), not an abort.
class Scratch {
 public:
  static Result<Scratch> allocate(size_t bytes) {
    Scratch scratch;
    if (bytes == 0) return Result<Scratch>(std::move(scratch));
    keep_pool_memory();
    const cudaError_t err = cudaMallocAsync(&scratch.ptr_, bytes, op_stream());
    if (err == cudaSuccess) return Result<Scratch>(std::move(scratch));
    scratch.ptr_ = nullptr;
    (void)cudaGetLastError();  // the next launch's check must not see this error as its own
    const std::string what = "op scratch of " + std::to_string(bytes) + " bytes: ";
    if (err == cudaErrorMemoryAllocation) return resource_exhausted(what + cudaGetErrorString(err));
    return internal_error(what + cudaGetErrorString(err));
  }
  Scratch(Scratch&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  Scratch& operator=(Scratch&& other) noexcept {
    std::swap(ptr_, other.ptr_);
    return *this;
  }
  ~Scratch() {
    if (ptr_ != nullptr && !release_after_join(ptr_)) {
      DSV4_CUDA_CHECK(cudaFreeAsync(ptr_, op_stream()));
    }
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }

 private:
  Scratch() = default;

  void* ptr_ = nullptr;
};

}  // namespace dsv4::kernels::cuda

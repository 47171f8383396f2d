// Device memory for the length of one op call (a split's partial results, a staging copy),
// from the stream-ordered pool: capturable into a CUDA graph, and kept by the pool between
// calls instead of mapped again each time.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

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
// kernels::run_beside, after its join: base/device_stream.h).
class Scratch {
 public:
  explicit Scratch(size_t bytes) {
    if (bytes == 0) return;
    keep_pool_memory();
    DSV4_CUDA_CHECK(cudaMallocAsync(&ptr_, bytes, op_stream()));
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
  void* ptr_ = nullptr;
};

}  // namespace dsv4::kernels::cuda

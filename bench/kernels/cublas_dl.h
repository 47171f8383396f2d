// cuBLAS for the benchmarks' same-run baselines, opened at run time (dlopen libcublas.so.13):
// this CUDA toolkit ships no static cuBLAS, and the binaries must run on the device machine as
// built. A missing or unusable library leaves Cublas::ok() false and the caller skips the row.
#pragma once

#include <cublas_v2.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>

#include "base/check.h"
#include "kernels/cuda/stream.h"

namespace dsv4::bench {

using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                    int, const void*, const void*, cudaDataType, int, const void*,
                                    cudaDataType, int, const void*, void*, cudaDataType, int,
                                    cublasComputeType_t, cublasGemmAlgo_t);

struct Cublas {
  cublasHandle_t handle = nullptr;
  GemmExFn gemm = nullptr;
  bool ok() const { return handle != nullptr; }
};

inline Cublas open_cublas() {
  using CreateFn = cublasStatus_t (*)(cublasHandle_t*);
  using SetStreamFn = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
  Cublas c;
  void* lib = dlopen("libcublas.so.13", RTLD_NOW);
  if (lib == nullptr) {
    std::printf("cuBLAS: not found (%s); comparisons skipped\n", dlerror());
    return c;
  }
  auto create = reinterpret_cast<CreateFn>(dlsym(lib, "cublasCreate_v2"));
  auto set_stream = reinterpret_cast<SetStreamFn>(dlsym(lib, "cublasSetStream_v2"));
  c.gemm = reinterpret_cast<GemmExFn>(dlsym(lib, "cublasGemmEx"));
  if (create == nullptr || set_stream == nullptr || c.gemm == nullptr ||
      create(&c.handle) != CUBLAS_STATUS_SUCCESS ||
      set_stream(c.handle, kernels::cuda::op_stream()) != CUBLAS_STATUS_SUCCESS) {
    std::printf("cuBLAS: unusable; comparisons skipped\n");
    c.handle = nullptr;
  }
  return c;
}

// C[M, N] = alpha · A[M, K] · W[N, K]ᵀ (row-major, A and W of `in`, C of `out`), f32 compute
// (no TF32: the default math mode), as the column-major Cᵀ = W · Aᵀ.
inline void cublas_gemm(const Cublas& c, const void* a, const void* w, void* out, int64_t m,
                        int64_t n, int64_t k, float alpha, cudaDataType in = CUDA_R_16BF,
                        cudaDataType out_type = CUDA_R_16BF) {
  const float beta = 0.0f;
  const cublasStatus_t s =
      c.gemm(c.handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
             static_cast<int>(k), &alpha, w, in, static_cast<int>(k), a, in, static_cast<int>(k),
             &beta, out, out_type, static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  DSV4_CHECK(s == CUBLAS_STATUS_SUCCESS, "cublasGemmEx failed: %d", static_cast<int>(s));
}

}  // namespace dsv4::bench

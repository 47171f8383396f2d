// cuBLASLt's FP8 GEMM for the FP8 benchmark's same-run baseline, opened at run time (dlopen
// libcublasLt.so.13, as cublas_dl.h opens cuBLAS: no static library in this toolkit). It runs
// D[M, N] = A[M, K] · W[N, K]ᵀ with e4m3 operands as cuBLASLt's column-major "TN" GEMM
// Dᵀ = W · Aᵀ, block-scaled where this cuBLASLt offers it on the device (W's scales
// BLK128x128_32F, A's VEC128_32F: DeepSeek's 128 × 128 and 1 × 128 blocks), else with one f32
// scale per tensor; `scaling` says which ran. A missing library or an unsupported
// configuration leaves ok() false and the caller skips the column.
#pragma once

#include <cublasLt.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "base/check.h"
#include "kernels/cuda/stream.h"

namespace dsv4::bench {

class CublasLtFp8 {
 public:
  // d_f32: D in f32 (else bf16). a_scales f32 [M, ceil(K/128)] and w_scales f32
  // [ceil(N/128), ceil(K/128)] on the device (block mode), and `one`, a device f32 1.0
  // (per-tensor mode).
  CublasLtFp8(int64_t m, int64_t n, int64_t k, const float* a_scales, const float* w_scales,
              const float* one, void* workspace, size_t workspace_bytes)
      : workspace_(workspace), workspace_bytes_(workspace_bytes) {
    if (!load()) return;
    for (const bool block : {true, false}) {
      for (const bool f32 : {true, false}) {
        if (configure(m, n, k, block ? a_scales : one, block ? w_scales : one, block, f32)) {
          scaling_ = std::string(block ? "1x128 · 128x128 block scales" : "per-tensor scales") +
                     (f32 ? ", f32 out" : ", bf16 out");
          return;
        }
      }
    }
    std::printf("cuBLASLt FP8: no algorithm for M %lld N %lld K %lld\n", (long long)m, (long long)n,
                (long long)k);
  }
  bool ok() const { return ok_; }
  bool d_f32() const { return d_f32_; }
  const std::string& scaling() const { return scaling_; }

  void run(const void* a, const void* w, void* d) const {
    const float alpha = 1.0f, beta = 0.0f;
    const cublasStatus_t s =
        matmul_(handle_, desc_, &alpha, w, w_layout_, a, a_layout_, &beta, d, d_layout_, d,
                d_layout_, &algo_, workspace_, workspace_bytes_, kernels::cuda::op_stream());
    DSV4_CHECK(s == CUBLAS_STATUS_SUCCESS, "cublasLtMatmul failed: %d", static_cast<int>(s));
  }

 private:
  using CreateFn = cublasStatus_t (*)(cublasLtHandle_t*);
  using DescCreateFn = cublasStatus_t (*)(cublasLtMatmulDesc_t*, cublasComputeType_t,
                                          cudaDataType_t);
  using DescSetFn = cublasStatus_t (*)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t,
                                       const void*, size_t);
  using LayoutCreateFn = cublasStatus_t (*)(cublasLtMatrixLayout_t*, cudaDataType, uint64_t,
                                            uint64_t, int64_t);
  using PrefCreateFn = cublasStatus_t (*)(cublasLtMatmulPreference_t*);
  using PrefSetFn = cublasStatus_t (*)(cublasLtMatmulPreference_t,
                                       cublasLtMatmulPreferenceAttributes_t, const void*, size_t);
  using HeuristicFn = cublasStatus_t (*)(cublasLtHandle_t, cublasLtMatmulDesc_t,
                                         cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                         cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                         cublasLtMatmulPreference_t, int,
                                         cublasLtMatmulHeuristicResult_t*, int*);
  using MatmulFn = cublasStatus_t (*)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void*,
                                      const void*, cublasLtMatrixLayout_t, const void*,
                                      cublasLtMatrixLayout_t, const void*, const void*,
                                      cublasLtMatrixLayout_t, void*, cublasLtMatrixLayout_t,
                                      const cublasLtMatmulAlgo_t*, void*, size_t, cudaStream_t);

  bool load() {
    void* lib = dlopen("libcublasLt.so.13", RTLD_NOW);
    if (lib == nullptr) {
      std::printf("cuBLASLt: not found (%s); its column is skipped\n", dlerror());
      return false;
    }
    auto create = reinterpret_cast<CreateFn>(dlsym(lib, "cublasLtCreate"));
    desc_create_ = reinterpret_cast<DescCreateFn>(dlsym(lib, "cublasLtMatmulDescCreate"));
    desc_set_ = reinterpret_cast<DescSetFn>(dlsym(lib, "cublasLtMatmulDescSetAttribute"));
    layout_create_ = reinterpret_cast<LayoutCreateFn>(dlsym(lib, "cublasLtMatrixLayoutCreate"));
    pref_create_ = reinterpret_cast<PrefCreateFn>(dlsym(lib, "cublasLtMatmulPreferenceCreate"));
    pref_set_ = reinterpret_cast<PrefSetFn>(dlsym(lib, "cublasLtMatmulPreferenceSetAttribute"));
    heuristic_ = reinterpret_cast<HeuristicFn>(dlsym(lib, "cublasLtMatmulAlgoGetHeuristic"));
    matmul_ = reinterpret_cast<MatmulFn>(dlsym(lib, "cublasLtMatmul"));
    return create != nullptr && desc_create_ != nullptr && desc_set_ != nullptr &&
           layout_create_ != nullptr && pref_create_ != nullptr && pref_set_ != nullptr &&
           heuristic_ != nullptr && matmul_ != nullptr && create(&handle_) == CUBLAS_STATUS_SUCCESS;
  }

  // Descriptors, layouts and the heuristic's first algorithm for one configuration.
  bool configure(int64_t m, int64_t n, int64_t k, const float* a_scale, const float* w_scale,
                 bool block, bool f32) {
    if (desc_create_(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) return false;
    const cublasOperation_t trans_w = CUBLAS_OP_T, trans_a = CUBLAS_OP_N;
    const cublasLtMatmulMatrixScale_t w_mode = block ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F
                                                     : CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    const cublasLtMatmulMatrixScale_t a_mode =
        block ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F;
    bool set =
        desc_set_(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &trans_w, sizeof trans_w) == 0 &&
        desc_set_(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &trans_a, sizeof trans_a) == 0 &&
        desc_set_(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scale, sizeof w_scale) == 0 &&
        desc_set_(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scale, sizeof a_scale) == 0;
    if (block) {
      set = set &&
            desc_set_(desc_, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &w_mode, sizeof w_mode) == 0 &&
            desc_set_(desc_, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &a_mode, sizeof a_mode) == 0;
    }
    const cudaDataType d_type = f32 ? CUDA_R_32F : CUDA_R_16BF;
    set = set && layout_create_(&w_layout_, CUDA_R_8F_E4M3, k, n, k) == 0 &&
          layout_create_(&a_layout_, CUDA_R_8F_E4M3, k, m, k) == 0 &&
          layout_create_(&d_layout_, d_type, n, m, n) == 0;
    cublasLtMatmulPreference_t pref;
    set = set && pref_create_(&pref) == 0 &&
          pref_set_(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                    sizeof workspace_bytes_) == 0;
    if (!set) return false;
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    if (heuristic_(handle_, desc_, w_layout_, a_layout_, d_layout_, d_layout_, pref, 1, &result,
                   &found) != CUBLAS_STATUS_SUCCESS ||
        found == 0) {
      return false;
    }
    algo_ = result.algo;
    ok_ = true;
    d_f32_ = f32;
    return true;
  }

  cublasLtHandle_t handle_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t w_layout_ = nullptr, a_layout_ = nullptr, d_layout_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  bool ok_ = false, d_f32_ = true;
  std::string scaling_;
  DescCreateFn desc_create_ = nullptr;
  DescSetFn desc_set_ = nullptr;
  LayoutCreateFn layout_create_ = nullptr;
  PrefCreateFn pref_create_ = nullptr;
  PrefSetFn pref_set_ = nullptr;
  HeuristicFn heuristic_ = nullptr;
  MatmulFn matmul_ = nullptr;
};

}  // namespace dsv4::bench

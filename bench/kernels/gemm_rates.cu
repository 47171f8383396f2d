// gemm_rates: the dense matrix-multiply rates a compute floor divides flops by, measured on this
// GPU in this program: cuBLAS's bf16 GEMM (f32 accumulate; the tensor-core rate of the exact
// profile's split linears, the routed experts' decoded weights and the fast attention),
// cuBLASLt's FP8 GEMM with DeepSeek's 1 × 128 · 128 × 128 block scales where this cuBLASLt offers
// them (the fast profile's linears and indexer; else per-tensor scales, and the line says so), and
// cuBLAS's f32 SGEMM without TF32 (the CUDA cores: the exact profile's attention and indexer, the
// f32 router and mHC mixes of both). Each is one 8192³ GEMM on random data (random operands
// draw more power than zeros, so this is the rate real weights see), the median of kRepeats
// calls. scripts/device/engine_bench.sh runs it once a call for the prefill's floor;
// scripts/device/engine_table.py reads its "rate NAME: X TFLOP/s" lines. Nothing to check
// against the CPU: the vendor's GEMMs are the reference here, and only their time is used.
//   usage: gemm_rates   (no arguments)
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdio>

#include "bench_harness.h"
#include "cublas_dl.h"
#include "cublaslt_fp8_dl.h"

namespace dsv4::bench {
namespace {

constexpr int64_t kSide = 8192;  // M = N = K
constexpr size_t kWorkspaceBytes = 64ull << 20;

// x[i] uniform in [lo, hi), rounded to T (bf16, f32 or e4m3: finite values only).
template <typename T>
__global__ void fill_uniform_kernel(T* x, int64_t n, uint32_t seed, float lo, float hi) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = T(lo + (hi - lo) * static_cast<float>(fill_hash(i, seed) >> 8) * (1.0f / 16777216.0f));
  }
}

template <typename T>
Tensor uniform(DType dtype, Shape shape, uint32_t seed, float lo, float hi) {
  Tensor t = device_tensor(dtype, shape);
  fill_uniform_kernel<<<1024, 256, 0, kernels::cuda::op_stream()>>>(static_cast<T*>(t.view().data),
                                                                    t.numel(), seed, lo, hi);
  DSV4_CUDA_CHECK(cudaGetLastError());
  return t;
}

double tflops(double ms) { return 2.0 * kSide * kSide * kSide / (ms * 1e-3) / 1e12; }

// cuBLAS GemmEx on two random n × n operands of `type`, f32 compute, output of `type`.
template <typename T>
double cublas_rate(const Cublas& cublas, DType dtype, cudaDataType type) {
  const Tensor a = uniform<T>(dtype, {kSide, kSide}, 1u, -0.5f, 0.5f);
  const Tensor w = uniform<T>(dtype, {kSide, kSide}, 2u, -0.5f, 0.5f);
  const Tensor c = device_tensor(dtype, {kSide, kSide});
  return tflops(median_ms([&] {
    cublas_gemm(cublas, a.view().data, w.view().data, c.view().data, kSide, kSide, kSide, 1.0f,
                type, type);
  }));
}

// cuBLASLt's FP8 GEMM on random e4m3 operands with power-of-two block scales; 0 if it has none.
double fp8_rate() {
  const int64_t groups = kSide / 128;
  const Tensor a = uniform<__nv_fp8_e4m3>(DType::kF8E4M3, {kSide, kSide}, 3u, -448.0f, 448.0f);
  const Tensor w = uniform<__nv_fp8_e4m3>(DType::kF8E4M3, {kSide, kSide}, 4u, -448.0f, 448.0f);
  const Tensor a_scales = uniform<float>(DType::kF32, {kSide, groups}, 5u, 0.0625f, 0.0625f);
  const Tensor w_scales = uniform<float>(DType::kF32, {groups, groups}, 6u, 0.0625f, 0.0625f);
  const Tensor one = uniform<float>(DType::kF32, {1}, 7u, 1.0f, 1.0f);
  const Tensor d = device_tensor(DType::kF32, {kSide, kSide});
  const Tensor workspace = device_tensor(DType::kU8, {static_cast<int64_t>(kWorkspaceBytes)});
  const CublasLtFp8 lt(kSide, kSide, kSide, a_scales.data_as<const float>(),
                       w_scales.data_as<const float>(), one.data_as<const float>(),
                       workspace.view().data, kWorkspaceBytes);
  if (!lt.ok()) return 0.0;
  const double rate =
      tflops(median_ms([&] { lt.run(a.view().data, w.view().data, d.view().data); }));
  std::printf("rate fp8: %.1f TFLOP/s (cuBLASLt e4m3, %s)\n", rate, lt.scaling().c_str());
  return rate;
}

int run() {
  cudaDeviceProp prop;
  DSV4_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("device %s, %d SMs; dense GEMM rates, %lld³ on random data, median of %d\n",
              prop.name, prop.multiProcessorCount, static_cast<long long>(kSide), kRepeats);
  const Cublas cublas = open_cublas();
  if (!cublas.ok()) return 1;
  std::printf("rate bf16: %.1f TFLOP/s (cuBLAS bf16, f32 accumulate)\n",
              cublas_rate<__nv_bfloat16>(cublas, DType::kBF16, CUDA_R_16BF));
  if (fp8_rate() == 0.0) std::printf("rate fp8: not measured (no cuBLASLt FP8 GEMM here)\n");
  std::printf("rate f32: %.1f TFLOP/s (cuBLAS SGEMM, CUDA cores, no TF32)\n",
              cublas_rate<float>(cublas, DType::kF32, CUDA_R_32F));
  return 0;
}

}  // namespace
}  // namespace dsv4::bench

int main() { return dsv4::bench::run(); }

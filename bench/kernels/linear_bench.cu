// linear_bench: the f32 linear (kernels/cuda/ops/linear.cu) on DeepSeek-V4-Flash's dense shapes,
// with the weight in f32 and in bf16 (what copy_weights keeps of a bf16 checkpoint on a GPU). A
// program, not a test: every shape is first checked (within kCudaF32OpRelTol of the CPU
// reference; on the CUDA-core kernels the bf16 weight's result must also be the f32 one's
// bits), then timed: kBatch calls captured in one CUDA graph, weights rotated over copies
// larger than the L2, the median of kRepeats replays over kBatch (host cost not counted).
// T ≤ 16 (decode): against the bytes that must move and the copy bandwidth measured in the same
// run (the bf16 weight on the tensor cores at 2-16 rows where linear_few_rows_tensor_cores.cu
// takes the shape). T > 16 (prefill): the bf16 weight runs on the tensor cores
// (linear_tensor_cores.cu), the f32 one on the CUDA cores, and cuBLAS's f32 SGEMM (no TF32) on the
// same call is the baseline; the floor is the three bf16 passes at cuBLAS's bf16 rate (8192³, same
// run). Then the shapes of ≤ 64 outputs at T > 16 (mHC's mixes, the indexer's head weights) on
// the kernel the plan gives them (the narrow one from 64 rows: linear_narrow.cu) against the
// few-rows kernel that ran them before (launched directly), which must give the same bits; the
// floor is reading x once at the copy bandwidth.
//   usage: linear_bench [out.md [T,T,...]]   (default T: 1,8)
//
// Dimension letters: T tokens, N output features, K input features.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "base/buffer.h"
#include "base/float_convert.h"
#include "bench_harness.h"
#include "cublas_dl.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemm/dense/launch.h"
#include "testing/compare.h"
#include "testing/device.h"
#include "testing/tolerance.h"

namespace dsv4::bench {
namespace {

constexpr int64_t kRotateBytes = 256ll << 20;  // > 4 × the 60 MB L2

struct LinearShape {
  const char* name;
  int64_t n, k;
  int64_t groups = 1;   // block_diagonal_linear's G: x is [T, groups·K]
  bool prefill = true;  // also run on every prompt token (not the lm_head: last tokens only)
};

// V4-Flash (hidden 4096, 64 heads of 512, q_lora 1024, 8 output groups of 1024, shared expert
// 2048, indexer 64 heads of 128, mHC 4 streams, vocab 129280): the linears of a decode step.
constexpr LinearShape kShapes[] = {
    {"attn wq_a", 1024, 4096}, {"attn wq_b", 32768, 1024},
    {"attn wkv", 512, 4096},   {"attn wo_a (8 groups)", 8192, 4096, 8},
    {"attn wo_b", 4096, 8192}, {"indexer wq_b", 8192, 1024},
    {"shared w1", 2048, 4096}, {"shared w2", 4096, 2048},
    {"mHC fn", 24, 16384},     {"indexer weights_proj", 64, 4096},
    {"lm_head", 129280, 4096, 1, false},
};

// bf16 values in [-1, 1) from a hash of the index: the bits, and their f32 widening.
__global__ void fill_weight_kernel(uint16_t* bits, float* widened, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    bits[i] = float_to_bf16(static_cast<float>(fill_hash(i, seed) % 4001) / 2000.0f - 1.0f);
    widened[i] = bf16_to_float(bits[i]);
  }
}

struct Weight {
  Tensor bf16, f32;
};

Weight make_weight(const LinearShape& s, uint32_t seed) {
  Weight w{device_tensor(DType::kBF16, {s.n, s.k}), device_tensor(DType::kF32, {s.n, s.k})};
  fill_weight_kernel<<<4096, 256>>>(w.bf16.data_as<uint16_t>(), w.f32.data_as<float>(), s.n * s.k,
                                    seed);
  DSV4_CUDA_CHECK(cudaGetLastError());
  return w;
}

// One group is linear itself (the same kernels, the same bits).
void run_linear(const LinearShape& s, const Tensor& x, const Tensor& w, const Tensor& y) {
  kernels::cuda::block_diagonal_linear(x.view(), w.view(), s.groups, y.view());
}

// The plan the call runs with the weight `w` (the bf16 or the f32 one).
kernels::cuda::DensePlan plan_of(const LinearShape& s, const Tensor& w, const Tensor& x,
                                 const Tensor& y) {
  return kernels::cuda::plan_for(
      kernels::block_diagonal_operands(x.view(), w.view(), s.groups, y.view()), s.groups);
}

// Whether the call runs on either tensor-core kernel (the bf16 weight; the f32 one never does).
bool on_tensor_cores(const LinearShape& s, const Weight& w, const Tensor& x, const Tensor& y) {
  const kernels::cuda::DenseKernel kernel = plan_of(s, w.bf16, x, y).kernel;
  return kernel == kernels::cuda::DenseKernel::kTensorCores ||
         kernel == kernels::cuda::DenseKernel::kFewRowsTensorCores;
}

std::string plan_name(const LinearShape& s, const Tensor& w, const Tensor& x, const Tensor& y) {
  return kernels::cuda::describe(plan_of(s, w, x, y));
}

// Both weights' results against the CPU's (the max row rel error of the worse); on the CUDA
// cores the bf16 weight must give the f32 one's bits.
double check(const LinearShape& s, int64_t t, const Weight& w, const Tensor& x) {
  Tensor y32 = device_tensor(DType::kF32, {t, s.n}), y16 = device_tensor(DType::kF32, {t, s.n});
  run_linear(s, x, w.f32, y32);
  run_linear(s, x, w.bf16, y16);
  const Tensor got32 = testing::to_host(y32.view()), got16 = testing::to_host(y16.view());
  DSV4_CHECK(on_tensor_cores(s, w, x, y16) || testing::same_bytes(got32.view(), got16.view()),
             "%s T=%lld: the bf16 weight changed the result", s.name, (long long)t);
  const Tensor x_host = testing::to_host(x.view()), w_host = testing::to_host(w.f32.view());
  Tensor want = Tensor::host(DType::kF32, {t, s.n});
  kernels::cpu::block_diagonal_linear(x_host.view(), w_host.view(), s.groups, want.view());
  const double err =
      std::max(testing::max_row_rel_error(got32.data_as<float>(), want.data_as<float>(), t, s.n),
               testing::max_row_rel_error(got16.data_as<float>(), want.data_as<float>(), t, s.n));
  DSV4_CHECK(err < testing::kCudaF32OpRelTol, "%s T=%lld: rel err %.2e", s.name, (long long)t, err);
  return err;
}

// What the prefill rows compare against, measured once: cuBLAS and its bf16 rate.
struct Baseline {
  Cublas cublas;
  double bf16_flops = 0.0;  // per second, cuBLAS bf16 8192³
};

Baseline measure_baseline() {
  Baseline b{open_cublas()};
  if (!b.cublas.ok()) return b;
  constexpr int64_t n = 8192;
  const Tensor a = std::move(make_weight({"a", n, n}, 1u).bf16);
  const Tensor w = std::move(make_weight({"w", n, n}, 2u).bf16);
  const Tensor c = device_tensor(DType::kBF16, {n, n});
  const double us =
      1000.0 * median_ms([&] {
        cublas_gemm(b.cublas, a.view().data, w.view().data, c.view().data, n, n, n, 1.0f);
      });
  b.bf16_flops = 2.0 * n * n * n / (us * 1e-6);
  return b;
}

// cuBLAS's f32 SGEMM of the call (group by group), µs per call in a graph like ours.
double cublas_sgemm_us(const Baseline& b, const LinearShape& s, const Tensor& x,
                       const std::vector<Weight>& weights, const Tensor& y) {
  const int64_t t = x.shape()[0], rows = s.n / s.groups;
  return graph_us_per_call([&](int i) {
    const Weight& w = weights[i % weights.size()];
    for (int64_t g = 0; g < s.groups; ++g) {
      // x [T, G·K] with row stride G·K: cuBLAS's lda is the stride, so a group is a column block.
      const float alpha = 1.0f, beta = 0.0f;
      DSV4_CHECK(
          b.cublas.gemm(b.cublas.handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows),
                        static_cast<int>(t), static_cast<int>(s.k), &alpha,
                        w.f32.data_as<float>() + g * rows * s.k, CUDA_R_32F, static_cast<int>(s.k),
                        x.data_as<float>() + g * s.k, CUDA_R_32F, static_cast<int>(s.groups * s.k),
                        &beta, y.data_as<float>() + g * rows, CUDA_R_32F, static_cast<int>(s.n),
                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS,
          "cublasGemmEx (f32) failed");
    }
  });
}

std::vector<Weight> rotated_weights(const LinearShape& s) {
  const int64_t f32_bytes = s.n * s.k * 4;
  const int copies =
      static_cast<int>(std::max<int64_t>(1, (kRotateBytes + f32_bytes - 1) / f32_bytes));
  std::vector<Weight> weights;
  for (int c = 0; c < copies; ++c) weights.push_back(make_weight(s, 17u + 31u * c));
  return weights;
}

// One shape at T rows: its operands, its check against the CPU, and µs per call with the f32
// and with the bf16 weight.
struct Measured {
  Tensor x, y;
  double err = 0.0;
  double us[2] = {};
};

Measured measure(const LinearShape& s, int64_t t, const std::vector<Weight>& weights) {
  Measured m;
  m.x = std::move(make_weight({"x", t, s.groups * s.k}, 5u).f32);  // random bf16 values, in f32
  m.y = device_tensor(DType::kF32, {t, s.n});
  m.err = check(s, t, weights[0], m.x);
  for (int bf16 = 0; bf16 < 2; ++bf16) {
    m.us[bf16] = graph_us_per_call([&](int i) {
      const Weight& w = weights[i % weights.size()];
      run_linear(s, m.x, bf16 ? w.bf16 : w.f32, m.y);
    });
  }
  return m;
}

void run_decode_shape(std::FILE* out, const LinearShape& s, const std::vector<int64_t>& tokens,
                      double bandwidth) {
  const std::vector<Weight> weights = rotated_weights(s);
  for (const int64_t t : tokens) {
    const Measured m = measure(s, t, weights);
    const double err = m.err, *us = m.us;
    const double io = 4.0 * t * (s.groups * s.k + s.n);
    const double floor16 = (2.0 * s.n * s.k + io) / bandwidth * 1e6;
    const double floor32 = (4.0 * s.n * s.k + io) / bandwidth * 1e6;
    std::fprintf(
        out,
        "| %s | %lld×%lld | %lld | %.1f (%s) | %.0f%% | %.1f (%s) | %.2f | %.1f | %.0f%% | "
        "%.1e |\n",
        s.name, (long long)s.n, (long long)s.k, (long long)t, us[0],
        plan_name(s, weights[0].f32, m.x, m.y).c_str(), 100.0 * floor32 / us[0], us[1],
        plan_name(s, weights[0].bf16, m.x, m.y).c_str(),
        (2.0 * s.n * s.k + io) / (us[1] * 1e-6) / 1e12, floor16, 100.0 * floor16 / us[1], err);
    std::fflush(out);
  }
}

void run_prefill_shape(std::FILE* out, const LinearShape& s, const std::vector<int64_t>& tokens,
                       const Baseline& baseline) {
  const std::vector<Weight> weights = rotated_weights(s);
  for (const int64_t t : tokens) {
    const Measured m = measure(s, t, weights);
    const double err = m.err, *us = m.us;
    const double sgemm =
        baseline.cublas.ok() ? cublas_sgemm_us(baseline, s, m.x, weights, m.y) : 0.0;
    const double flops = 2.0 * t * s.n * s.k;
    const double floor = baseline.bf16_flops > 0 ? 3.0 * flops / baseline.bf16_flops * 1e6 : 0.0;
    std::fprintf(
        out,
        "| %s | %lld×%lld | %lld | %.1f (%s) | %.1f (%s) | %.1f× | %.1f | %.1f | %.2f× | %.1f | "
        "%.0f%% | %.1e |\n",
        s.name, (long long)s.n, (long long)s.k, (long long)t, us[0],
        plan_name(s, weights[0].f32, m.x, m.y).c_str(), us[1],
        plan_name(s, weights[0].bf16, m.x, m.y).c_str(), us[0] / us[1],
        flops / (us[1] * 1e-6) / 1e12, sgemm, sgemm / us[1], floor, 100.0 * floor / us[1], err);
    std::fflush(out);
  }
}

// The few-rows kernel's shape below 128 outputs (plan.cpp), the narrow kernel's bits.
kernels::cuda::DensePlan few_rows_plan() {
  kernels::cuda::DensePlan plan;
  plan.kernel = kernels::cuda::DenseKernel::kFewRows;
  plan.warps = 16, plan.cols = 1, plan.split = 16, plan.tokens = 8;
  return plan;
}

// The call on the few-rows kernel whatever the plan says.
void run_few_rows(const Tensor& x, const Tensor& w, const Tensor& y) {
  kernels::cuda::launch_dense(kernels::linear_operands(x.view(), w.view(), y.view()), 1,
                              few_rows_plan());
}

// A shape of ≤ 64 outputs at T rows: the plan's kernel against the few-rows kernel, µs a call
// with the f32 and the bf16 weight; the two kernels' results must be the same bits (but for the
// bf16 weight on the tensor cores).
void run_narrow_shape(std::FILE* out, const LinearShape& s, const std::vector<int64_t>& tokens,
                      double bandwidth) {
  const std::vector<Weight> weights = rotated_weights(s);
  for (const int64_t t : tokens) {
    const Measured m = measure(s, t, weights);
    double few[2] = {};
    for (int bf16 = 0; bf16 < 2; ++bf16) {
      const Tensor y = device_tensor(DType::kF32, {t, s.n});
      run_few_rows(m.x, bf16 ? weights[0].bf16 : weights[0].f32, y);
      run_linear(s, m.x, bf16 ? weights[0].bf16 : weights[0].f32, m.y);
      DSV4_CHECK((bf16 && on_tensor_cores(s, weights[0], m.x, m.y)) ||
                     testing::same_bytes(testing::to_host(y.view()).view(),
                                         testing::to_host(m.y.view()).view()),
                 "%s T=%lld: the few-rows kernel gave other bits", s.name, (long long)t);
      few[bf16] = graph_us_per_call([&](int i) {
        const Weight& w = weights[i % weights.size()];
        run_few_rows(m.x, bf16 ? w.bf16 : w.f32, y);
      });
    }
    const double floor = 4.0 * t * s.k / bandwidth * 1e6;
    std::fprintf(out, "| %s | %lld×%lld | %lld | %.1f (%s) | %.1f | %.1f× | %.1f (%s) | %.1f | "
                      "%.1f× | %.1f |\n",
                 s.name, (long long)s.n, (long long)s.k, (long long)t, m.us[0],
                 plan_name(s, weights[0].f32, m.x, m.y).c_str(), few[0], few[0] / m.us[0],
                 m.us[1], plan_name(s, weights[0].bf16, m.x, m.y).c_str(), few[1],
                 few[1] / m.us[1], floor);
    std::fflush(out);
  }
}

}  // namespace
}  // namespace dsv4::bench

int main(int argc, char** argv) {
  using namespace dsv4::bench;
  std::FILE* out = argc > 1 ? std::fopen(argv[1], "w") : stdout;
  DSV4_CHECK(out != nullptr, "cannot open %s", argv[1]);
  const std::vector<int64_t> tokens = argc > 2 ? parse_list(argv[2]) : std::vector<int64_t>{1, 8};
  std::vector<int64_t> decode, prefill;
  for (const int64_t t : tokens) (t <= 16 ? decode : prefill).push_back(t);
  cudaDeviceProp prop;
  DSV4_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const double bandwidth = measure_copy_bandwidth();
  std::fprintf(out, "device: %s, %d SMs; copy bandwidth %.2f TB/s (read+write)\n\n", prop.name,
               prop.multiProcessorCount, bandwidth / 1e12);
  if (!decode.empty()) {
    std::fprintf(
        out,
        "| shape | N×K | T | f32 weight µs (plan) | f32 %% of its floor | bf16 weight µs (plan) | "
        "bf16 TB/s | bf16 floor µs | bf16 %% of floor | check rel err |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const LinearShape& s : kShapes) run_decode_shape(out, s, decode, bandwidth);
  }
  if (!prefill.empty()) {
    const Baseline baseline = measure_baseline();
    std::fprintf(out, "\ncuBLAS bf16 8192³: %.0f TFLOP/s\n\n", baseline.bf16_flops / 1e12);
    std::fprintf(out,
                 "| shape | N×K | T | f32 weight µs (plan) | bf16 weight µs (plan) | speed-up | "
                 "bf16 TFLOP/s | cuBLAS SGEMM µs | ours vs SGEMM | floor µs | %% of floor | "
                 "check rel err |\n"
                 "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const LinearShape& s : kShapes) {
      if (s.prefill) run_prefill_shape(out, s, prefill, baseline);
    }
    std::fprintf(out,
                 "\n| shape | N×K | T | f32 weight µs (plan) | f32 few-rows µs | speed-up | "
                 "bf16 weight µs (plan) | bf16 few-rows µs | speed-up | x-once floor µs |\n"
                 "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (const LinearShape& s : kShapes) {
      if (s.prefill && s.groups == 1 && s.n <= 64) run_narrow_shape(out, s, prefill, bandwidth);
    }
  }
  if (out != stdout) std::fclose(out);
  return 0;
}

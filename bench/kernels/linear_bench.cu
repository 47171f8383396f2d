// linear_bench: the f32 linear (kernels/cuda/linear.cu) on DeepSeek-V4-Flash's dense decode
// shapes, with the weight in f32 and in bf16 (what copy_weights keeps of a bf16 checkpoint on
// a GPU), against the bytes that must move and the copy bandwidth measured in the same run. A
// program, not a test: every shape is first checked (the bf16 weight's result must be the f32
// one's bits, and that one within kCudaF32OpRelTol of the CPU reference), then timed: kBatch
// calls captured in one CUDA graph, weights rotated over copies larger than the L2, the median of
// kRepeats replays over kBatch (decode runs as one launch after another; host cost not counted).
//   usage: linear_bench [out.md [T,T,...]]   (default T: 1,8)
//
// Dimension letters: T tokens, N output features, K input features.
#include <cuda_runtime.h>

#include <cstdio>
#include <string>
#include <vector>

#include "base/buffer.h"
#include "base/float_convert.h"
#include "bench_harness.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/cuda_ops.h"
#include "testing/compare.h"
#include "testing/device.h"
#include "testing/tolerance.h"

namespace dsv4::bench {
namespace {

constexpr int64_t kRotateBytes = 256ll << 20;  // > 4 × the 60 MB L2

struct LinearShape {
  const char* name;
  int64_t n, k;
  int64_t groups = 1;  // block_diagonal_linear's G: x is [T, groups·K]
};

// V4-Flash (hidden 4096, 64 heads of 512, q_lora 1024, 8 output groups of 1024, shared expert
// 2048, indexer 64 heads of 128, mHC 4 streams, vocab 129280): the linears of a decode step.
constexpr LinearShape kShapes[] = {
    {"attn wq_a", 1024, 4096},
    {"attn wq_b", 32768, 1024},
    {"attn wkv", 512, 4096},
    {"attn wo_a (8 groups)", 8192, 4096, 8},
    {"attn wo_b", 4096, 8192},
    {"indexer wq_b", 8192, 1024},
    {"shared w1", 2048, 4096},
    {"shared w2", 4096, 2048},
    {"mHC fn", 24, 16384},
    {"lm_head", 129280, 4096},
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
  fill_weight_kernel<<<4096, 256>>>(w.bf16.data_as<uint16_t>(), w.f32.data_as<float>(),
                                    s.n * s.k, seed);
  DSV4_CUDA_CHECK(cudaGetLastError());
  return w;
}

// One group is linear itself (the same kernels, the same bits).
void run_linear(const LinearShape& s, const Tensor& x, const Tensor& w, const Tensor& y) {
  kernels::cuda::block_diagonal_linear(x.view(), w.view(), s.groups, y.view());
}

// The bf16 weight's result against the f32 one's (bits) and the CPU's (max row rel error).
double check(const LinearShape& s, int64_t t, const Weight& w, const Tensor& x) {
  Tensor y32 = device_tensor(DType::kF32, {t, s.n}), y16 = device_tensor(DType::kF32, {t, s.n});
  run_linear(s, x, w.f32, y32);
  run_linear(s, x, w.bf16, y16);
  const Tensor got32 = testing::to_host(y32.view()), got16 = testing::to_host(y16.view());
  DSV4_CHECK(testing::same_bytes(got32.view(), got16.view()),
             "%s T=%lld: the bf16 weight changed the result", s.name, (long long)t);
  const Tensor x_host = testing::to_host(x.view()), w_host = testing::to_host(w.f32.view());
  Tensor want = Tensor::host(DType::kF32, {t, s.n});
  kernels::cpu::block_diagonal_linear(x_host.view(), w_host.view(), s.groups, want.view());
  return testing::max_row_rel_error(got32.data_as<float>(), want.data_as<float>(), t, s.n);
}

void run_shape(std::FILE* out, const LinearShape& s, const std::vector<int64_t>& tokens,
               double bandwidth) {
  const int64_t f32_bytes = s.n * s.k * 4;
  const int copies = static_cast<int>(std::max<int64_t>(1, (kRotateBytes + f32_bytes - 1) / f32_bytes));
  std::vector<Weight> weights;
  for (int c = 0; c < copies; ++c) weights.push_back(make_weight(s, 17u + 31u * c));
  for (const int64_t t : tokens) {
    // Activations: the f32 widening of random bf16 values.
    const Tensor x = std::move(make_weight({"x", t, s.groups * s.k}, 5u).f32);
    const Tensor y = device_tensor(DType::kF32, {t, s.n});
    const double err = check(s, t, weights[0], x);
    double us[2];
    for (int bf16 = 0; bf16 < 2; ++bf16) {
      us[bf16] = graph_us_per_call([&](int i) {
        const Weight& w = weights[i % copies];
        run_linear(s, x, bf16 ? w.bf16 : w.f32, y);
      });
    }
    const double io = 4.0 * t * (s.groups * s.k + s.n);
    const double floor16 = (2.0 * s.n * s.k + io) / bandwidth * 1e6;
    const double floor32 = (4.0 * s.n * s.k + io) / bandwidth * 1e6;
    std::fprintf(out, "| %s | %lld×%lld | %lld | %.1f | %.0f%% | %.1f | %.2f | %.1f | %.0f%% | %.1e |\n",
                 s.name, (long long)s.n, (long long)s.k, (long long)t, us[0], 100.0 * floor32 / us[0],
                 us[1], (2.0 * s.n * s.k + io) / (us[1] * 1e-6) / 1e12, floor16,
                 100.0 * floor16 / us[1], err);
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
  cudaDeviceProp prop;
  DSV4_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const double bandwidth = measure_copy_bandwidth();
  std::fprintf(out, "device: %s, %d SMs; copy bandwidth %.2f TB/s (read+write)\n\n", prop.name,
               prop.multiProcessorCount, bandwidth / 1e12);
  std::fprintf(out, "| shape | N×K | T | f32 weight µs | f32 %% of its floor | bf16 weight µs | "
                    "bf16 TB/s | bf16 floor µs | bf16 %% of floor | check rel err |\n"
                    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const LinearShape& s : kShapes) run_shape(out, s, tokens, bandwidth);
  if (out != stdout) std::fclose(out);
  return 0;
}

// fp8_gemm_bench: the FP8 linear of the fast profile (kernels::linear_fp8 on quantized operands,
// gemm/fp8/) on DeepSeek-V4-Flash's FP8 linear shapes, against the same-run baselines: cuBLASLt's
// FP8 GEMM (1 × 128 · 128 × 128 block scales where this cuBLASLt offers them on the device, else
// per-tensor scales; the table says which) and, at M ≤ 64, the read ceiling of the weights'
// bytes (read_ceiling.h). A program, not a test: every shape is first checked against the CPU
// reference (its first 16 rows) and cuBLASLt against our kernel on the same operands with unit
// scales; then each is timed as kBatch calls (weights rotated over copies larger than the L2)
// in one CUDA graph, the median of kRepeats replays. The activation quantizer
// (quantize_activation_fp8, f32 in) is timed beside, as the fast profile runs it before each
// linear. An alternative plan is timed beside the plan's: at 16 < M ≤ 64 the other of the
// stream and the 128-token wgmma kernel, above 64 the wgmma kernel with the other token tile.
// wo_a runs block-diagonally (block_diagonal_linear_fp8: its 8 groups in one launch; no cuBLASLt
// column, the read ceiling of its 33.5 MB is the measure at decode sizes), and beside it the exact
// profile's wo_a (block_diagonal_linear of the f32 activation on the FP8 weight). Where the plan
// splits a tile's K over a cluster, the other plan is the same stream kernel a CTA a tile.
//   usage: fp8_gemm_bench [out.md [M,M,... [shape]]]   (default M: 1,8,16,64,4096,16384;
//          shape: only the shapes whose name contains it)
//
// Dimension letters: M tokens, N output features, K input features, Kb = ceil(K/128).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "base/buffer.h"
#include "base/row_error.h"
#include "bench_harness.h"
#include "cublaslt_fp8_dl.h"
#include "kernels/cuda/gemm/fp8/config.h"
#include "kernels/cuda/gemm/fp8/launch.h"
#include "kernels/cuda/gemm/fp8/plan.h"
#include "kernels/ops.h"
#include "read_ceiling.h"

namespace dsv4::bench {
namespace {

using kernels::cuda::sm90::Fp8GemmParams;
using kernels::cuda::sm90::Fp8GemmPlan;

constexpr int64_t kCheckRows = 16;
constexpr size_t kCublasWorkspace = 64ull << 20;

struct LinearShape {
  const char* name;
  int64_t n, k;        // all groups' rows; one group's columns
  int64_t groups = 1;  // G > 1: block_diagonal_linear_fp8, x [M, G·K]
};

// V4-Flash (D = 4096, 64 heads of 512, q rank 1024, o groups 8 × rank 1024, shared expert 2048).
// wo_a is block-diagonal: 8 groups of [1024, 4096], one call (block_diagonal_linear_fp8).
constexpr LinearShape kShapes[] = {
    {"wq_a", 1024, 4096},      {"wq_b", 32768, 1024},
    {"wkv", 512, 4096},        {"wo_a (8 groups)", 8192, 4096, 8},
    {"wo_b", 4096, 8192},      {"shared w1+w3", 4096, 4096},
    {"shared w2", 4096, 2048},
};

int64_t groups(int64_t k) { return (k + 127) / 128; }

// ---- device fills ----
__global__ void fill_f32_kernel(float* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint32_t h = fill_hash(i, seed);
    // Magnitudes 2^-4 .. 2^4 by 128-column group, so the group scales differ.
    const float magnitude = exp2f(static_cast<float>(fill_hash(i / 128, seed ^ 0x55u) % 9) - 4.0f);
    p[i] = (static_cast<float>(h % 2001) - 1000.0f) / 1000.0f * magnitude;
  }
}
// e4m3 codes with finite values (never 0x7f / 0xff), weight scales powers of two 2^-12 .. 2^-4.
__global__ void fill_codes_kernel(uint8_t* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint8_t code = static_cast<uint8_t>(fill_hash(i, seed) >> 8);
    p[i] = (code & 0x7f) == 0x7f ? code & 0xfe : code;
  }
}
__global__ void fill_scales_kernel(float* p, int64_t n, uint32_t seed, bool unit) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    p[i] = unit ? 1.0f : exp2f(-4.0f - static_cast<float>(fill_hash(i, seed) % 9));
  }
}
__global__ void bf16_to_f32_kernel(const uint16_t* in, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = __uint_as_float(uint32_t{in[i]} << 16);
  }
}

void check_fill() { DSV4_CUDA_CHECK(cudaGetLastError()); }

Tensor to_host(const TensorView& device) {
  Tensor t = Tensor::host(device.dtype, device.shape);
  DSV4_CHECK(copy_tensor(t.view(), device).ok(), "copy to host failed");
  return t;
}

// One weight [N, K] in FP8 with its block scales, `copies` times (rotated past the L2).
struct Weights {
  std::vector<Tensor> values;
  Tensor scales, unit_scales;
  format::Fp8BlockView view(size_t copy, bool unit = false) const {
    const TensorView v = values[copy % values.size()].view();
    return {v.data_as<const uint8_t>(),
            (unit ? unit_scales : scales).data_as<const float>(),
            v.shape[0],
            v.shape[1],
            v.shape[1],
            Device::kCuda};
  }
};

Weights make_weights(int64_t n, int64_t k) {
  Weights w;
  const int copies = static_cast<int>(std::clamp<int64_t>(kRotateBytes / (n * k) + 1, 2, 16));
  for (int c = 0; c < copies; ++c) {
    w.values.push_back(device_tensor(DType::kF8E4M3, {n, k}));
    fill_codes_kernel<<<1024, 256>>>(w.values.back().data_as<uint8_t>(), n * k, 11);
  }
  const int64_t count = groups(n) * groups(k);
  w.scales = device_tensor(DType::kF32, {groups(n), groups(k)});
  w.unit_scales = device_tensor(DType::kF32, {groups(n), groups(k)});
  fill_scales_kernel<<<64, 256>>>(w.scales.data_as<float>(), count, 5, false);
  fill_scales_kernel<<<64, 256>>>(w.unit_scales.data_as<float>(), count, 5, true);
  check_fill();
  return w;
}

struct Row {
  std::string shape, plan, cublas_scaling;
  int64_t m = 0, n = 0, k = 0, groups = 1;
  std::string alt_plan;
  double us = 0, us_alt = 0, us_cublas = 0, us_quantize = 0, us_ceiling = 0, us_exact = 0;
  double check = 0, cublas_check = -1;
};

// The CPU reference on the first kCheckRows rows, against the device's.
double check_rows(const kernels::Fp8Activation& a, const Weights& w, int64_t groups,
                  const Tensor& y_dev) {
  const int64_t rows = std::min(kCheckRows, a.values.shape[0]);
  const int64_t k = a.values.shape[1] / groups, n = y_dev.view().shape[1];
  const Tensor a_values = to_host(a.values.rows(0, rows)),
               a_scales = to_host(a.scales.rows(0, rows));
  const Tensor w_values = to_host(w.values[0].view()), w_scales = to_host(w.scales.view());
  const Tensor y_ref = Tensor::host(DType::kF32, {rows, n});
  const format::Fp8BlockView w_host{
      w_values.data_as<const uint8_t>(), w_scales.data_as<const float>(), n, k, k, Device::kCpu};
  const kernels::Fp8Activation a_host{a_values.view(), a_scales.view()};
  DSV4_CHECK(
      (groups == 1 ? kernels::linear_fp8(a_host, w_host, y_ref.view())
                   : kernels::block_diagonal_linear_fp8(a_host, w_host, groups, y_ref.view()))
          .ok(),
      "cpu linear_fp8");
  const Tensor y = to_host(y_dev.view().rows(0, rows));
  return max_row_rel_error(y.data_as<float>(), y_ref.data_as<float>(), rows, n);
}

Row run_shape(const LinearShape& s, int64_t m, const Weights& w, double ceiling_us, int n_sm,
              const Tensor& workspace, const Tensor& one) {
  Row r;
  r.shape = s.name, r.m = m, r.n = s.n, r.k = s.k, r.groups = s.groups;
  const int64_t k_all = s.groups * s.k;  // x's columns
  const Tensor x = device_tensor(DType::kF32, {m, k_all});
  fill_f32_kernel<<<4096, 256>>>(x.data_as<float>(), m * k_all, 3);
  check_fill();
  const Tensor a_values = device_tensor(DType::kF8E4M3, {m, k_all});
  const Tensor a_scales = device_tensor(DType::kF32, {m, groups(k_all)});
  const Tensor a_unit = device_tensor(DType::kF32, {m, groups(k_all)});
  fill_scales_kernel<<<256, 256>>>(a_unit.data_as<float>(), m * groups(k_all), 0, true);
  check_fill();
  const kernels::Fp8Activation a{a_values.view(), a_scales.view()};
  const kernels::Fp8Activation a_ones{a_values.view(), a_unit.view()};
  const Tensor y = device_tensor(DType::kF32, {m, s.n});
  auto linear = [&](const kernels::Fp8Activation& act, const format::Fp8BlockView& wv) {
    DSV4_CHECK((s.groups == 1 ? kernels::linear_fp8(act, wv, y.view())
                              : kernels::block_diagonal_linear_fp8(act, wv, s.groups, y.view()))
                   .ok(),
               "linear_fp8");
  };

  r.us_quantize = graph_us_per_call(
      [&](int) { DSV4_CHECK(kernels::quantize_activation_fp8(x.view(), a).ok(), "quantize"); });
  linear(a, w.view(0));
  r.check = check_rows(a, w, s.groups, y);
  const Fp8GemmPlan plan = kernels::cuda::sm90::plan_fp8_gemm(m, s.n, s.k, n_sm);
  r.plan = kernels::cuda::sm90::describe(plan);
  r.us = graph_us_per_call([&](int i) { linear(a, w.view(static_cast<size_t>(i))); });
  namespace sm90 = kernels::cuda::sm90;
  if (m > 16 || plan.stream_split > 1) {
    Fp8GemmPlan alt;
    if (plan.stream_split > 1) {
      alt = sm90::plan_fp8_stream(m, s.n, s.k, n_sm, 1);  // a CTA a tile
    } else if (plan.path == sm90::Fp8GemmPath::kWsWgmma) {
      alt = m <= sm90::kFp8StreamMaxTokens
                ? sm90::plan_fp8_stream(m, s.n, s.k, n_sm)
                : sm90::plan_fp8_ws(m, s.n, plan.ws_tile_m == 256 ? 128 : 256, n_sm);
    } else {
      alt = sm90::plan_fp8_ws(m, s.n, 128, n_sm);
    }
    r.alt_plan = sm90::describe(alt);
    r.us_alt = graph_us_per_call([&](int i) {
      const format::Fp8BlockView wv = w.view(static_cast<size_t>(i));
      Fp8GemmParams p{a_values.data_as<const uint8_t>(),
                      a_scales.data_as<const float>(),
                      wv.values,
                      wv.row_stride,
                      wv.block_scales,
                      y.data_as<float>(),
                      s.n,
                      m,
                      s.n,
                      s.k,
                      s.groups};
      sm90::launch_fp8_gemm(p, alt);
    });
  }
  if (m <= kernels::cuda::sm90::kFp8StreamMaxTokens) r.us_ceiling = ceiling_us;
  if (s.groups > 1) {  // the exact profile's wo_a: the f32 activation on the FP8 weight, decoded
    r.us_exact = graph_us_per_call([&](int i) {
      DSV4_CHECK(kernels::block_diagonal_linear(x.view(), w.view(static_cast<size_t>(i)), s.groups,
                                                y.view())
                     .ok(),
                 "block_diagonal_linear");
    });
  }

  if (s.groups > 1) return r;  // no grouped cuBLASLt baseline: the read ceiling is the measure
  CublasLtFp8 cublas(m, s.n, s.k, a_unit.data_as<const float>(),
                     w.unit_scales.data_as<const float>(), one.data_as<const float>(),
                     workspace.view().data, kCublasWorkspace);
  if (cublas.ok()) {
    r.cublas_scaling = cublas.scaling();
    const Tensor d = device_tensor(cublas.d_f32() ? DType::kF32 : DType::kBF16, {m, s.n});
    // Same operands, unit scales on both sides: cuBLASLt's result against ours.
    cublas.run(a_values.view().data, w.values[0].view().data, d.view().data);
    linear(a_ones, w.view(0, true));
    const int64_t rows = std::min(kCheckRows, m);
    const Tensor d_f32 = device_tensor(DType::kF32, {rows, s.n});
    if (cublas.d_f32()) {
      DSV4_CUDA_CHECK(
          cudaMemcpy(d_f32.view().data, d.view().data, rows * s.n * 4, cudaMemcpyDeviceToDevice));
    } else {
      bf16_to_f32_kernel<<<256, 256>>>(d.data_as<const uint16_t>(), d_f32.data_as<float>(),
                                       rows * s.n);
      check_fill();
    }
    const Tensor ours = to_host(y.view().rows(0, rows)), theirs = to_host(d_f32.view());
    r.cublas_check = max_row_rel_error(theirs.data_as<float>(), ours.data_as<float>(), rows, s.n);
    r.us_cublas = graph_us_per_call([&](int i) {
      cublas.run(a_values.view().data,
                 w.values[static_cast<size_t>(i) % w.values.size()].view().data, d.view().data);
    });
  }
  return r;
}

void print_row(FILE* f, const Row& r) {
  const double flops = 2.0 * r.m * r.n * r.k;
  const double bytes = static_cast<double>(r.n) * r.k + 4.0 * groups(r.n) * groups(r.k) +
                       static_cast<double>(r.m) * r.groups * r.k +
                       4.0 * r.m * groups(r.groups * r.k) + 4.0 * r.m * r.n;
  std::fprintf(f, "| %s | %lld | %lld×%lld | %s | %.2f | %.1f | %.0f |", r.shape.c_str(),
               (long long)r.m, (long long)r.n, (long long)r.k, r.plan.c_str(), r.us,
               flops / (r.us * 1e-6) / 1e12, bytes / (r.us * 1e-6) / 1e9);
  if (r.us_cublas > 0) {
    std::fprintf(f, " %.2f | %.1f | %.0f%% |", r.us_cublas, flops / (r.us_cublas * 1e-6) / 1e12,
                 100.0 * r.us_cublas / r.us);
  } else {
    std::fprintf(f, " - | - | - |");
  }
  if (r.us_ceiling > 0) {
    std::fprintf(f, " %.2f | %.0f%% |", r.us_ceiling, 100.0 * r.us_ceiling / r.us);
  } else {
    std::fprintf(f, " - | - |");
  }
  if (r.us_alt > 0) {
    std::fprintf(f, " %s: %.2f |", r.alt_plan.c_str(), r.us_alt);
  } else {
    std::fprintf(f, " - |");
  }
  if (r.us_exact > 0) {
    std::fprintf(f, " %.2f |", r.us_exact);
  } else {
    std::fprintf(f, " - |");
  }
  std::fprintf(f, " %.2f | %.1e | ", r.us_quantize, r.check);
  if (r.cublas_check >= 0) {
    std::fprintf(f, "%.1e |\n", r.cublas_check);
  } else {
    std::fprintf(f, "- |\n");
  }
}

int run(int argc, char** argv) {
  FILE* out = argc > 1 ? std::fopen(argv[1], "w") : stdout;
  DSV4_CHECK(out != nullptr, "cannot open %s", argv[1]);
  std::vector<int64_t> ms = {1, 8, 16, 64, 4096, 16384};
  if (argc > 2) ms = parse_list(argv[2]);
  const char* only = argc > 3 ? argv[3] : nullptr;
  cudaDeviceProp prop;
  DSV4_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const int n_sm = prop.multiProcessorCount;
  const Tensor workspace = device_tensor(DType::kU8, {static_cast<int64_t>(kCublasWorkspace)});
  const Tensor one = device_tensor(DType::kF32, {1});
  fill_scales_kernel<<<1, 32>>>(one.data_as<float>(), 1, 0, true);
  check_fill();
  std::fprintf(out, "device: %s, %d SMs\n\n", prop.name, n_sm);
  std::fprintf(
      out,
      "| shape | M | N×K | plan | µs | TFLOP/s | GB/s | µs cuBLASLt | TFLOP/s cuBLASLt | "
      "cuBLASLt / ours | µs read ceiling | ceiling / ours | µs other plan | µs exact profile "
      "| µs quantize | check vs CPU | cuBLASLt vs ours |\n");
  std::fprintf(
      out, "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::string scaling;
  for (const LinearShape& s : kShapes) {
    if (only != nullptr && std::strstr(s.name, only) == nullptr) continue;
    const Weights w = make_weights(s.n, s.k);
    const double ceiling_us = read_ceiling(s.n * s.k, n_sm).us;
    for (const int64_t m : ms) {
      const Row r = run_shape(s, m, w, ceiling_us, n_sm, workspace, one);
      if (!r.cublas_scaling.empty()) scaling = r.cublas_scaling;
      print_row(out, r);
      std::fflush(out);
    }
  }
  std::fprintf(out, "\ncuBLASLt: %s\n", scaling.empty() ? "unavailable" : scaling.c_str());
  if (out != stdout) std::fclose(out);
  return 0;
}

}  // namespace
}  // namespace dsv4::bench

int main(int argc, char** argv) { return dsv4::bench::run(argc, argv); }

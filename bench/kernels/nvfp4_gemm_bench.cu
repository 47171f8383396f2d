// nvfp4_gemm_bench: the sm_90a NVFP4 GEMM on DeepSeek-V4 expert and attention shapes, against
// the bytes that must move, the measured ceilings (a device-to-device copy, a large cuBLAS bf16
// GEMM) and cuBLAS bf16 on the dequantized weights, all in the same run. A program, not a test:
// every shape is first checked against the CPU reference (64 rows), then timed: kBatch calls
// (weights rotated over copies larger than the L2) captured in one CUDA graph, the median of
// kRepeats replays over kBatch, so host launch cost is not counted (decode runs as graphs).
// For M ≥ 512 it also times, on the same call, the two-warpgroup kernel
// (nvfp4_two_warpgroup/) the warp-specialised one replaced, and the warp-specialised one with
// 128-token tiles where the plan chose 256, and the warp-specialised one with its token
// tiles by cp.async instead of TMA; for M ≤ 16, the small-M kernel (split-K atomics) the stream
// kernel replaced. With DSV4_BENCH_PROFILE=1 in the environment nothing is timed: each variant
// runs once, in the order check, W4A16 op, W4A4 op, two-warpgroup, ws 128 tokens, ws cp.async
// (for ncu's --launch-skip: a shape's warp-specialised launches are 0..4 in that order).
//   usage: nvfp4_gemm_bench [out.md [M,M,... [shape]]]   (default M: 1,8,64,512,4096,16384;
//          shape: only the shapes whose name contains it, e.g. "Pro gate")
//          nvfp4_gemm_bench grouped [out.md [R,R,... [shape]]]   grouped calls of 256 (Flash)
//          or 384 (Pro) experts with R rows each (default R: 8,16,32,48,64,96,192), on every
//          plan (run_grouped)
//          nvfp4_gemm_bench grouped-poisson [...]   the same, each expert's rows drawn from a
//          Poisson distribution of mean R (random routing), which plan.cpp plans for
//          nvfp4_gemm_bench stream [out.md [M,M,... [shape]]]   the stream kernel (M ≤ 8) on
//          each of its CTA shapes (warps a CTA, CTAs an SM), each checked against the CPU
// cuBLAS is opened at run time (cublas_dl.h).
//
// Dimension letters: M tokens, N output features, K input features.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/buffer.h"
#include "format/nvfp4.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/stream.h"
#include "kernels/cuda/gemm/nvfp4/config.h"
#include "kernels/cuda/gemm/nvfp4/plan.h"
#include "kernels/cuda/gemm/nvfp4/launch.h"
#include "testing/compare.h"
#include "bench_harness.h"
#include "cublas_dl.h"
#include "nvfp4_two_warpgroup/launch.h"

namespace dsv4::bench {
namespace {

using format::ScaleLayout;

constexpr int64_t kRotateBytes = 256ll << 20;  // > 4 × the 50 MB L2
constexpr int64_t kCheckRows = 64;

struct Shape3 {
  const char* name;
  int64_t n, k;
};

// ---- device data ----
// Random bytes: any byte is two valid E2M1 codes; scales in [2^-3, 2^4] (never 0x7f).
__global__ void fill_random_kernel(uint8_t* p, int64_t n, uint32_t seed, bool scales) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint32_t h = fill_hash(i, seed);
    p[i] = scales ? static_cast<uint8_t>(0x20 + h % 0x38) : static_cast<uint8_t>(h >> 8);
  }
}

__global__ void fill_bf16_kernel(__nv_bfloat16* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 16;
    h *= 2246822519u;
    p[i] = __float2bfloat16_rn((static_cast<float>(h % 2001) - 1000.0f) / 500.0f + 1e-3f);
  }
}

// W bf16 [N, K] = e2m1 · ue4m3 (exact), the operand cuBLAS gets.
__global__ void dequantize_kernel(const uint8_t* packed, const uint8_t* scale, int64_t n, int64_t k,
                                  __nv_bfloat16* out) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n * k;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint8_t byte = packed[i / 2];
    const float v = e2m1_to_float(i % 2 == 0 ? (byte & 0xf) : (byte >> 4)) *
                    e4m3_to_float(scale[i / 16]);
    out[i] = __float2bfloat16_rn(v);
  }
}

void fill_random(const TensorView& t, uint32_t seed, bool scales) {
  fill_random_kernel<<<1024, 256>>>(t.data_as<uint8_t>(), static_cast<int64_t>(t.bytes()), seed,
                                    scales);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

// One weight matrix [N, K] in NVFP4 and, for cuBLAS, dequantized.
struct Weights {
  Tensor packed, scale, global, dense;
  format::Nvfp4View view() const {
    return format::Nvfp4View{packed.view(), scale.view(), global.view(), ScaleLayout::kLinear};
  }
};

Weights make_weights(int64_t n, int64_t k, uint32_t seed, bool dense) {
  Weights w{device_tensor(DType::kU8, {1, n, k / 2}), device_tensor(DType::kU8, {1, n, k / 16}),
            device_tensor(DType::kF32, {1}), Tensor()};
  fill_random(w.packed.view(), seed, false);
  fill_random(w.scale.view(), seed * 7 + 1, true);
  const float global = 1.0f / 1024.0f;
  DSV4_CUDA_CHECK(cudaMemcpy(w.global.view().data, &global, sizeof global, cudaMemcpyHostToDevice));
  if (dense) {
    w.dense = device_tensor(DType::kBF16, {n, k});
    dequantize_kernel<<<4096, 256>>>(w.packed.data_as<uint8_t>(), w.scale.data_as<uint8_t>(), n, k,
                                     w.dense.data_as<__nv_bfloat16>());
    DSV4_CUDA_CHECK(cudaGetLastError());
  }
  return w;
}

double measure_cublas_peak(const Cublas& c) {
  const int64_t s = 8192;
  Tensor a = device_tensor(DType::kBF16, {s, s}), b = device_tensor(DType::kBF16, {s, s});
  Tensor d = device_tensor(DType::kBF16, {s, s});
  fill_bf16_kernel<<<4096, 256>>>(a.data_as<__nv_bfloat16>(), s * s, 1);
  fill_bf16_kernel<<<4096, 256>>>(b.data_as<__nv_bfloat16>(), s * s, 2);
  DSV4_CUDA_CHECK(cudaGetLastError());
  const double us = 1000.0 * median_ms([&] {
    cublas_gemm(c, a.view().data, b.view().data, d.view().data, s, s, s, 1.0f);
  });
  return 2.0 * s * s * s / (us * 1e-6);
}

// ---- one shape ----
struct Row {
  std::string shape;
  int64_t m, n, k;
  double us, us_w4a4, us_cublas, floor_us, bytes, flops, check_error;
  double us_two_wg;     // the two-warpgroup kernel on the W4A16 call (0: not that path)
  double us_ws_narrow;  // the warp-specialised kernel with 128-token tiles (0: not timed)
  double us_ws_cp_async;  // the warp-specialised kernel, token tiles by cp.async (0: not timed)
  double us_small_m;      // the small-M kernel where the stream kernel was chosen (0: not timed)
  std::string path;
};

// The plan for a dense M × N × K.
std::string path_name(int64_t m, int64_t n, int64_t k, int n_sm) {
  using namespace kernels::cuda::sm90;
  return describe(plan_nvfp4_gemm(static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
                                  static_cast<int>(k), 1, n_sm));
}

// A GPU result (d_rows, f32, device) against cpu::nvfp4_gemm of its device operands: a_rows
// (bf16) times one weight matrix.
double check_against_cpu(const format::Nvfp4View& w, const TensorView& a_rows,
                         const TensorView& d_rows) {
  const int64_t rows = a_rows.shape[0], n = w.n_rows(), k = w.n_cols();
  Tensor packed = Tensor::host(DType::kU8, {1, n, k / 2}), scale = Tensor::host(DType::kU8, {1, n, k / 16});
  Tensor global = Tensor::host(DType::kF32, {1});
  Tensor a_host = Tensor::host(DType::kBF16, {rows, k}), want = Tensor::host(DType::kF32, {rows, n});
  Tensor got = Tensor::host(DType::kF32, {rows, n});
  DSV4_CHECK(copy_tensor(packed.view(), w.packed).ok() &&
             copy_tensor(scale.view(), w.block_scale).ok() &&
             copy_tensor(global.view(), w.global_scale).ok() &&
             copy_tensor(a_host.view(), a_rows).ok() && copy_tensor(got.view(), d_rows).ok(),
             "copy to host failed");
  const format::Nvfp4View b{packed.view(), scale.view(), global.view(), ScaleLayout::kLinear};
  kernels::cpu::nvfp4_gemm(a_host.view(), b, want.view());
  return dsv4::testing::max_row_rel_error(got.data_as<float>(), want.data_as<float>(), rows, n);
}

Row run_shape(const Shape3& s, int64_t m, const Cublas& cublas, double bandwidth, double peak,
              int n_sm) {
  const int64_t n = s.n, k = s.k;
  const int64_t weight_bytes = n * k / 2 + n * k / 16;
  const int n_copies = static_cast<int>(std::clamp<int64_t>(kRotateBytes / weight_bytes + 1, 2, 32));
  const int n_dense = static_cast<int>(std::clamp<int64_t>(kRotateBytes / (2 * n * k) + 1, 2, 8));
  std::vector<Weights> weights;
  for (int i = 0; i < n_copies; ++i) weights.push_back(make_weights(n, k, 17 + i, i < n_dense));
  Tensor a = device_tensor(DType::kBF16, {m, k});
  fill_bf16_kernel<<<4096, 256>>>(a.data_as<__nv_bfloat16>(), m * k, 99);
  DSV4_CUDA_CHECK(cudaGetLastError());
  Tensor staged_packed = device_tensor(DType::kU8, {m, k / 2});
  Tensor staged_scale = device_tensor(DType::kU8, {m, k / 16});
  Tensor staged_global = device_tensor(DType::kF32, {1});
  const kernels::StagedActivation staged{staged_packed.view(), staged_scale.view(),
                                         staged_global.view(), ScaleLayout::kLinear};
  DSV4_CHECK(kernels::cuda::stage_activation(a.view(), TensorView{}, staged).ok(), "stage failed");
  Tensor d32 = device_tensor(DType::kF32, {m, n}), d16 = device_tensor(DType::kBF16, {m, n});

  Row row{s.name, m, n, k, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, path_name(m, n, k, n_sm)};
  DSV4_CHECK(kernels::cuda::nvfp4_gemm(a.view(), weights[0].view(), d32.view()).ok(), "gemm failed");
  const int64_t check_rows = std::min(m, kCheckRows);
  row.check_error = check_against_cpu(weights[0].view(), a.view().rows(0, check_rows),
                                      d32.view().rows(0, check_rows));
  row.us = graph_us_per_call([&](int i) {
    DSV4_CHECK(kernels::cuda::nvfp4_gemm(a.view(), weights[i % n_copies].view(), d16.view()).ok(), "gemm");
  });
  row.us_w4a4 = graph_us_per_call([&](int i) {
    DSV4_CHECK(kernels::cuda::nvfp4_gemm(staged, weights[i % n_copies].view(), d16.view()).ok(), "gemm");
  });
  {  // the same W4A16 call on other plans (K is a multiple of 64: no padding)
    using namespace kernels::cuda::sm90;
    Nvfp4GemmParams p{};
    p.a = a.data_as<const uint16_t>();
    p.lda = k;
    p.b_scale = weights[0].scale.data_as<const uint8_t>();
    p.d = d16.view().data;
    p.ldd = n;
    p.n_rows = static_cast<int>(m);
    p.n = static_cast<int>(n);
    p.k = p.kp = static_cast<int>(k);
    p.n_groups = 1;
    p.d_bf16 = true;
    // Each call on the next copy of the weights, launched by `launch`.
    auto time_launch = [&](auto launch) {
      return graph_us_per_call([&](int i) {
        const Weights& w = weights[i % n_copies];
        p.b_packed = w.packed.data_as<const uint8_t>();
        p.b_scale = w.scale.data_as<const uint8_t>();
        p.b_global = w.global.data_as<const float>();
        launch();
      });
    };
    auto time_plan = [&](const Nvfp4GemmPlan& plan) {
      return time_launch([&] { launch_nvfp4_gemm(p, plan); });
    };
    if (plan_for(p).path == Nvfp4GemmPath::kWsWgmma) {  // the kernel it replaced, same call
      row.us_two_wg = time_launch([&] { launch_two_warpgroup(p, n_sm); });
    }
    Nvfp4GemmPlan narrow = plan_for(p);
    if (narrow.path == Nvfp4GemmPath::kWsWgmma && narrow.ws_tokens == 256) {
      narrow.ws_tokens = 128;  // the warp-specialised kernel with 128-token tiles instead
      row.us_ws_narrow = time_plan(narrow);
    }
    if (plan_for(p).path == Nvfp4GemmPath::kStream) {  // its alternative, small-M, same call
      Tensor accum = device_tensor(DType::kF32, {m, n});
      p.accum = accum.data_as<float>();
      row.us_small_m = time_plan(plan_small_m(p.n_rows, p.n, p.kp, 1, n_sm));
      p.accum = nullptr;
    }
    Nvfp4GemmPlan cp_async = plan_for(p);
    if (cp_async.path == Nvfp4GemmPath::kWsWgmma) {
      cp_async.tma_tokens = false;  // the warp-specialised kernel, token tiles by cp.async
      row.us_ws_cp_async = time_plan(cp_async);
    }
  }
  if (cublas.ok() && !profile_mode()) {
    row.us_cublas = graph_us_per_call([&](int i) {
      cublas_gemm(cublas, a.view().data, weights[i % n_dense].dense.view().data, d16.view().data, m,
                  n, k, 1.0f / 1024.0f);
    });
  }
  row.bytes = static_cast<double>(weight_bytes) + 2.0 * m * k + 2.0 * m * n;
  row.flops = 2.0 * m * n * k;
  row.floor_us = 1e6 * std::max(row.bytes / bandwidth, peak > 0 ? row.flops / peak : 0.0);
  return row;
}

// ---- grouped (MoE) calls ----
// G experts' matrices [G, N, K] with R rows each (an expert's share of T·top-k rows: V4-Flash
// at T = 2048 gives R = 48), on the plan plan.cpp chooses and, in the same call, forced
// onto the small-M kernel and onto the warp-specialised one with 128- and 256-token tiles.
// The warp-specialised kernel's token tiles the grouped table times.
constexpr int kWsTokens[] = {32, 64, 128, 256};
constexpr int kWsWidths = sizeof(kWsTokens) / sizeof(kWsTokens[0]);

struct GroupedRow {
  std::string shape, path;
  int64_t g, rows_per_group, n, k;
  double us, us_small_m, floor_us, flops, check_error;
  double us_ws[kWsWidths];  // the warp-specialised kernel at each of kWsTokens per tile
};

// The row offsets of g groups of r rows each, or with `poisson` of rows drawn from a Poisson
// distribution of mean r (fixed seed): an MoE's experts under random routing.
std::vector<int32_t> group_offsets(int64_t g, int64_t r, bool poisson) {
  std::mt19937 engine(1234);
  std::poisson_distribution<int> rows(static_cast<double>(r));
  std::vector<int32_t> offsets(g + 1, 0);
  for (int64_t i = 0; i < g; ++i) {
    offsets[i + 1] = offsets[i] + static_cast<int32_t>(poisson ? rows(engine) : r);
  }
  return offsets;
}

GroupedRow run_grouped(const Shape3& s, int64_t g, int64_t r, bool poisson, double bandwidth,
                       double peak, int n_sm) {
  using namespace kernels::cuda::sm90;
  const std::vector<int32_t> offsets_host = group_offsets(g, r, poisson);
  const int64_t n = s.n, k = s.k, m = offsets_host[g];
  Weights w{device_tensor(DType::kU8, {g, n, k / 2}), device_tensor(DType::kU8, {g, n, k / 16}),
            device_tensor(DType::kF32, {g}), Tensor()};
  fill_random(w.packed.view(), 5, false);
  fill_random(w.scale.view(), 6, true);
  const std::vector<float> globals(g, 1.0f / 1024.0f);
  Tensor offsets = device_tensor(DType::kI32, {g + 1});
  DSV4_CUDA_CHECK(cudaMemcpy(w.global.view().data, globals.data(), 4 * g, cudaMemcpyHostToDevice));
  DSV4_CUDA_CHECK(cudaMemcpy(offsets.view().data, offsets_host.data(), 4 * (g + 1),
                             cudaMemcpyHostToDevice));
  Tensor a = device_tensor(DType::kBF16, {m, k});
  fill_bf16_kernel<<<4096, 256>>>(a.data_as<__nv_bfloat16>(), m * k, 77);
  DSV4_CUDA_CHECK(cudaGetLastError());
  Tensor d32 = device_tensor(DType::kF32, {m, n}), d16 = device_tensor(DType::kBF16, {m, n});
  Tensor accum = device_tensor(DType::kF32, {m, n});

  GroupedRow row{s.name, "", g, r, n, k, 0, 0, 0, 2.0 * m * n * k, 0, {}};
  DSV4_CHECK(kernels::cuda::nvfp4_grouped_gemm(a.view(), w.view(), offsets.view(), d32.view()).ok(),
             "grouped gemm failed");
  // The first rows of a middle expert that has some.
  int64_t checked = g / 2;
  while (checked + 1 < g && offsets_host[checked + 1] == offsets_host[checked]) ++checked;
  const int64_t first = offsets_host[checked];
  const int64_t check_rows = std::min<int64_t>(offsets_host[checked + 1] - first, kCheckRows);
  row.check_error = check_against_cpu(w.view().matrix(checked), a.view().rows(first, first + check_rows),
                                      d32.view().rows(first, first + check_rows));
  row.us = graph_us_per_call([&](int) {
    DSV4_CHECK(kernels::cuda::nvfp4_grouped_gemm(a.view(), w.view(), offsets.view(), d16.view()).ok(),
               "grouped gemm");
  });
  Nvfp4GemmParams p{};
  p.a = a.data_as<const uint16_t>();
  p.lda = k;
  p.b_packed = w.packed.data_as<const uint8_t>();
  p.b_scale = w.scale.data_as<const uint8_t>();
  p.b_global = w.global.data_as<const float>();
  p.offsets = offsets.data_as<const int32_t>();
  p.d = d16.view().data;
  p.ldd = n;
  p.accum = accum.data_as<float>();
  p.n_rows = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.k = p.kp = static_cast<int>(k);
  p.n_groups = static_cast<int>(g);
  p.d_bf16 = true;
  row.path = describe(plan_for(p));
  auto time_plan = [&](const Nvfp4GemmPlan& plan) {
    return graph_us_per_call([&](int) { launch_nvfp4_gemm(p, plan); });
  };
  row.us_small_m = time_plan(plan_small_m(p.n_rows, p.n, p.kp, p.n_groups, n_sm));
  Nvfp4GemmPlan ws = plan_ws(p.n_rows, p.n, p.n_groups, n_sm);
  for (int i = 0; i < kWsWidths; ++i) {
    ws.ws_tokens = kWsTokens[i];
    ws.grid = n_sm * ws_ctas_per_sm(ws.ws_tokens);
    row.us_ws[i] = time_plan(ws);
    // Each width's output checked too (f32, the middle expert's first rows).
    p.d = d32.view().data, p.d_bf16 = false;
    launch_nvfp4_gemm(p, ws);
    row.check_error = std::max(
        row.check_error, check_against_cpu(w.view().matrix(checked),
                                           a.view().rows(first, first + check_rows),
                                           d32.view().rows(first, first + check_rows)));
    p.d = d16.view().data, p.d_bf16 = true;
  }
  const double bytes = static_cast<double>(g) * (n * k / 2 + n * k / 16) + 2.0 * m * k + 2.0 * m * n;
  row.floor_us = 1e6 * std::max(bytes / bandwidth, peak > 0 ? row.flops / peak : 0.0);
  return row;
}

void print_grouped_row(std::FILE* f, const GroupedRow& r) {
  double best = std::min(r.us, r.us_small_m);
  for (double us : r.us_ws) best = std::min(best, us);
  std::fprintf(f, "| %s | %lld | %lld | %lld×%lld | %s | %.1f | %.1f |", r.shape.c_str(),
               (long long)r.g, (long long)r.rows_per_group, (long long)r.n, (long long)r.k,
               r.path.c_str(), r.us, r.us_small_m);
  for (double us : r.us_ws) std::fprintf(f, " %.1f |", us);
  std::fprintf(f, " %.1f | %.1f | %.2f | %.2e |\n", r.flops / (best * 1e-6) / 1e12, r.floor_us,
               best / r.floor_us, r.check_error);
}

// ---- the stream kernel's CTA shapes (one token chunk) ----
// Warps a CTA and CTAs an SM (the register cap) of each stream plan timed.
struct StreamShape {
  int warps, min_blocks;
};
constexpr StreamShape kStreamShapes[] = {{4, 4}, {8, 2}, {8, 4}};
constexpr int kStreamShapeCount = sizeof(kStreamShapes) / sizeof(kStreamShapes[0]);

struct StreamRow {
  std::string shape;
  int64_t m, n, k;
  double us[kStreamShapeCount];
  double floor_us, check_error;
};

// One dense W4A16 call of M ≤ 8 rows on every stream CTA shape, each checked against the CPU.
StreamRow run_stream_shapes(const Shape3& s, int64_t m, double bandwidth) {
  using namespace kernels::cuda::sm90;
  const int64_t n = s.n, k = s.k;
  const int64_t weight_bytes = n * k / 2 + n * k / 16;
  const int n_copies = static_cast<int>(std::clamp<int64_t>(kRotateBytes / weight_bytes + 1, 2, 32));
  std::vector<Weights> weights;
  for (int i = 0; i < n_copies; ++i) weights.push_back(make_weights(n, k, 17 + i, false));
  Tensor a = device_tensor(DType::kBF16, {m, k});
  fill_bf16_kernel<<<4096, 256>>>(a.data_as<__nv_bfloat16>(), m * k, 99);
  DSV4_CUDA_CHECK(cudaGetLastError());
  Tensor d32 = device_tensor(DType::kF32, {m, n}), d16 = device_tensor(DType::kBF16, {m, n});
  Nvfp4GemmParams p{};
  p.a = a.data_as<const uint16_t>();
  p.lda = k;
  p.ldd = n;
  p.n_rows = static_cast<int>(m);
  p.n = static_cast<int>(n);
  p.k = p.kp = static_cast<int>(k);
  p.n_groups = 1;
  auto use_weights = [&](const Weights& w) {
    p.b_packed = w.packed.data_as<const uint8_t>();
    p.b_scale = w.scale.data_as<const uint8_t>();
    p.b_global = w.global.data_as<const float>();
  };
  StreamRow row{s.name, m, n, k, {}, 0, 0};
  for (int i = 0; i < kStreamShapeCount; ++i) {
    Nvfp4GemmPlan plan;
    plan.path = Nvfp4GemmPath::kStream;
    plan.stream_warps = kStreamShapes[i].warps;
    plan.stream_min_blocks = kStreamShapes[i].min_blocks;
    use_weights(weights[0]);
    p.d = d32.view().data, p.d_bf16 = false;
    DSV4_CUDA_CHECK(cudaMemset(p.d, 0xff, m * n * sizeof(float)));  // NaN where unwritten
    launch_nvfp4_gemm(p, plan);
    row.check_error =
        std::max(row.check_error, check_against_cpu(weights[0].view(), a.view(), d32.view()));
    p.d = d16.view().data, p.d_bf16 = true;
    row.us[i] = graph_us_per_call([&](int call) {
      use_weights(weights[call % n_copies]);
      launch_nvfp4_gemm(p, plan);
    });
  }
  row.floor_us = 1e6 * (static_cast<double>(weight_bytes) + 2.0 * m * k + 2.0 * m * n) / bandwidth;
  return row;
}

void print_stream_row(std::FILE* f, const StreamRow& r) {
  std::fprintf(f, "| %s | %lld | %lld×%lld |", r.shape.c_str(), (long long)r.m, (long long)r.n,
               (long long)r.k);
  double best = r.us[0];
  for (double us : r.us) std::fprintf(f, " %.2f |", us), best = std::min(best, us);
  std::fprintf(f, " %.2f | %.0f%% | %.2e |\n", r.floor_us, 100.0 * r.floor_us / best,
               r.check_error);
}

void print_row(std::FILE* f, const Row& r) {
  std::fprintf(f,
               "| %s | %lld | %lld×%lld | %s | %.1f | %s | %s | %s | %s | %.2f | %.1f | %.1f | %.0f%% | %.1f | %s | %.1f | %.2e |\n",
               r.shape.c_str(), (long long)r.m, (long long)r.n, (long long)r.k, r.path.c_str(), r.us,
               r.us_two_wg > 0 ? std::to_string(r.us_two_wg).substr(0, 7).c_str() : "-",
               r.us_ws_narrow > 0 ? std::to_string(r.us_ws_narrow).substr(0, 7).c_str() : "-",
               r.us_ws_cp_async > 0 ? std::to_string(r.us_ws_cp_async).substr(0, 7).c_str() : "-",
               r.us_small_m > 0 ? std::to_string(r.us_small_m).substr(0, 7).c_str() : "-",
               r.bytes / (r.us * 1e-6) / 1e12, r.flops / (r.us * 1e-6) / 1e12, r.floor_us,
               100.0 * r.floor_us / r.us, r.us_w4a4,
               r.us_cublas > 0 ? (std::to_string(r.us_cublas).substr(0, 7) + " (" +
                                  std::to_string(static_cast<int>(100.0 * r.us_cublas / r.us)) + "%)")
                                     .c_str()
                               : "-",
               r.us_cublas > 0 ? r.flops / (r.us_cublas * 1e-6) / 1e12 : 0.0, r.check_error);
}

}  // namespace
}  // namespace dsv4::bench

namespace dsv4::bench {
namespace {

const Shape3 kShapes[] = {{"Flash gate_up", 2 * 2048, 4096}, {"Flash down", 4096, 2048},
                          {"Pro gate_up", 2 * 3072, 7168}, {"Pro down", 7168, 3072}};

// Each shape's experts (256 V4-Flash, 384 V4-Pro) at each rows-per-expert count.
void run_grouped_table(std::FILE* out, const std::vector<int64_t>& rows_per_group, bool poisson,
                       const char* only, double bandwidth, double peak, int n_sm) {
  if (poisson) std::fprintf(out, "rows per expert: Poisson of the mean given (fixed seed)\n\n");
  std::fprintf(out, "| shape | G | rows/expert | N×K | heuristic plan | µs (heuristic) | µs small-M |");
  for (int tokens : kWsTokens) std::fprintf(out, " µs ws %d tok |", tokens);
  std::fprintf(out, " TFLOP/s (best) | floor µs | best / floor | check rel err (all plans) |\n");
  std::fprintf(out, "|---|---:|---:|---|---|---:|---:|");
  for (int i = 0; i < kWsWidths; ++i) std::fprintf(out, "---:|");
  std::fprintf(out, "---:|---:|---:|---:|\n");
  for (const Shape3& s : kShapes) {
    if (only != nullptr && std::strstr(s.name, only) == nullptr) continue;
    const int64_t g = std::strncmp(s.name, "Flash", 5) == 0 ? 256 : 384;
    for (const int64_t r : rows_per_group) {
      const GroupedRow row = run_grouped(s, g, r, poisson, bandwidth, peak, n_sm);
      print_grouped_row(out, row);
      if (out != stdout) print_grouped_row(stdout, row);
      std::fflush(out);
    }
  }
}

void run_dense_table(std::FILE* out, const std::vector<int64_t>& ms, const char* only,
                     const Cublas& cublas, double bandwidth, double peak, int n_sm) {
  std::fprintf(out, "| shape | M | N×K | kernel | µs (W4A16) | µs 2-WG kernel | µs ws 128 tok | µs ws cp.async tok | µs small-M kernel | TB/s | TFLOP/s | floor µs | %% of floor | "
               "µs W4A4 | cuBLAS bf16 µs (ours vs it) | cuBLAS TFLOP/s | check rel err |\n");
  std::fprintf(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Shape3& s : kShapes) {
    if (only != nullptr && std::strstr(s.name, only) == nullptr) continue;
    for (const int64_t m : ms) {
      const Row r = run_shape(s, m, cublas, bandwidth, peak, n_sm);
      print_row(out, r);
      if (out != stdout) print_row(stdout, r);
      std::fflush(out);
    }
  }
}

void run_stream_table(std::FILE* out, const std::vector<int64_t>& ms, const char* only,
                      double bandwidth) {
  std::fprintf(out, "| shape | M | N×K |");
  for (const StreamShape& c : kStreamShapes) {
    std::fprintf(out, " µs %d warps, %d CTAs/SM |", c.warps, c.min_blocks);
  }
  std::fprintf(out, " floor µs | best %% of floor | check rel err (all) |\n|---|---:|---|");
  for (int i = 0; i < kStreamShapeCount; ++i) std::fprintf(out, "---:|");
  std::fprintf(out, "---:|---:|---:|\n");
  for (const Shape3& s : kShapes) {
    if (only != nullptr && std::strstr(s.name, only) == nullptr) continue;
    for (const int64_t m : ms) {
      const StreamRow r = run_stream_shapes(s, m, bandwidth);
      print_stream_row(out, r);
      if (out != stdout) print_stream_row(stdout, r);
      std::fflush(out);
    }
  }
}

}  // namespace
}  // namespace dsv4::bench

int main(int argc, char** argv) {
  using namespace dsv4::bench;
  // "grouped" or "grouped-poisson" first: the MoE table (rows per expert instead of M), the
  // other arguments shift.
  const bool poisson = argc > 1 && std::strcmp(argv[1], "grouped-poisson") == 0;
  const bool grouped = poisson || (argc > 1 && std::strcmp(argv[1], "grouped") == 0);
  const bool stream = argc > 1 && std::strcmp(argv[1], "stream") == 0;
  if (grouped || stream) --argc, ++argv;
  cudaDeviceProp prop;
  DSV4_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const Cublas cublas = open_cublas();
  const double bandwidth = profile_mode() ? 1e12 : measure_copy_bandwidth();
  const double peak = cublas.ok() && !profile_mode() ? measure_cublas_peak(cublas) : 0.0;
  std::FILE* out = argc > 1 ? std::fopen(argv[1], "w") : stdout;
  DSV4_CHECK(out != nullptr, "cannot open %s", argv[1]);
  const std::vector<int64_t> sizes =
      argc > 2 ? parse_list(argv[2])
               : grouped ? std::vector<int64_t>{8, 16, 32, 48, 64, 96, 192}
               : stream  ? std::vector<int64_t>{1, 8}
                         : std::vector<int64_t>{1, 8, 64, 512, 4096, 16384};
  const char* only = argc > 3 ? argv[3] : nullptr;
  std::fprintf(out, "device: %s, %d SMs, L2 %d MB; copy bandwidth %.2f TB/s (read+write); "
               "cuBLAS bf16 8192³ %.0f TFLOP/s\n\n", prop.name, prop.multiProcessorCount,
               prop.l2CacheSize >> 20, bandwidth / 1e12, peak / 1e12);
  if (grouped) {
    run_grouped_table(out, sizes, poisson, only, bandwidth, peak, prop.multiProcessorCount);
  } else if (stream) {
    run_stream_table(out, sizes, only, bandwidth);
  } else {
    run_dense_table(out, sizes, only, cublas, bandwidth, peak, prop.multiProcessorCount);
  }
  if (out != stdout) std::fclose(out);
  return 0;
}

// The NVFP4 MoE block (kernels/cuda/moe/) at DeepSeek-V4-Flash and -Pro layer shapes.
// First the ceilings, measured here: device-to-device copy bandwidth (bytes read + written) and
// the cuBLAS bf16 GEMM rate (8192³, random data; cuBLAS opened at run time, cublas_dl.h). Then
// per shape and mode: a check against the CPU moe_ffn at small T on both paths, and for each T
// the median of 25 runs (CUDA events; rotating over 8 inputs so the routed experts change), the
// floor max(weight bytes touched / bandwidth, flops / bf16 rate) and the ratio. Fused W4A16 is
// also timed as a replayed CUDA graph (the decode use).
//
// Usage: moe_bench [--tokens 1,8,...] [--shapes flash,pro] [--modes w4a16,w4a4]
//                  [--paths fused,grouped] [--experts device|host] [--routing score|hash].
// Prints one table row per run.
// Without --paths, fused runs up to T = 512 and grouped from T = 8 (where each is a candidate);
// with it, the paths named run at every T. --experts host puts the routed experts' codes and
// block scales in mapped pinned host memory, as expert offload does (checkpoint/
// expert_offload.h); the routed bytes' floor is then the host-to-device copy rate, measured here,
// and each T has two more rows: the touched experts copied to the device by the op first, and
// both stacks copied whole by the copy engines first (model/moe.cpp's two ways). --routing hash
// routes as V4's first layers do, by a tid2eid table of the inputs' token ids (the small router
// then reads only the T·K gate rows it needs).
// Dimension letters: T tokens, D model width, E routed experts, K experts per token, F width.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "base/buffer.h"
#include "cublas_dl.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/moe/kernels.h"
#include "kernels/cuda/moe/moe_pipeline.h"
#include "kernels/ops.h"
#include "testing/compare.h"

namespace dsv4::bench {
namespace {

using kernels::MoeConfig;
using kernels::MoeMode;
using kernels::MoeWeightsView;
using kernels::cuda::moe::MoePath;

struct LayerShape {
  const char* name;
  int64_t dim, ffn, n_experts, k_used;
};

// The plan a path runs at n_tokens: its expert kernels and, on the grouped path, the plan of
// the routed rows' L1 GEMM (the experts' rows spread evenly: the plan reads only the shape).
std::string plan_name(MoePath path, const MoeConfig& cfg, const LayerShape& s, int64_t n_tokens) {
  namespace sm90 = kernels::cuda::sm90;
  const sm90::MoeExperts experts =
      kernels::cuda::moe::moe_experts_on(path, n_tokens, cfg.mode == MoeMode::kW4A4);
  std::string name = sm90::describe(experts);
  if (experts != sm90::MoeExperts::kGrouped) return name;
  int device = 0, n_sm = 0;
  DSV4_CUDA_CHECK(cudaGetDevice(&device));
  DSV4_CUDA_CHECK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, device));
  const sm90::Nvfp4GemmPlan l1 = sm90::plan_nvfp4_gemm(
      static_cast<int>(n_tokens * s.k_used), static_cast<int>(2 * s.ffn), static_cast<int>(s.dim),
      static_cast<int>(s.dim), static_cast<int>(s.n_experts), n_sm);
  return name + ", L1 " + sm90::describe(l1);
}

constexpr int kReps = 25;
constexpr int kInputs = 8;

Tensor device_tensor(DType dtype, Shape shape) {
  Result<Tensor> t = Tensor::empty(dtype, shape, Device::kCuda);
  DSV4_CHECK(t.ok(), "device allocation of %s failed", shape.to_string().c_str());
  return std::move(t).value();
}

Tensor mapped_host_tensor(DType dtype, Shape shape) {
  Result<Tensor> t = Tensor::empty_mapped_host(dtype, shape);
  DSV4_CHECK(t.ok(), "pinned host allocation of %s failed", shape.to_string().c_str());
  return std::move(t).value();
}

Tensor to_host(const TensorView& device) {
  Tensor t = Tensor::host(device.dtype, device.shape);
  DSV4_CHECK(copy_tensor(t.view(), device).ok(), "copy to host failed");
  return t;
}

__device__ uint32_t mix(uint64_t i, uint32_t seed) {
  uint32_t h = static_cast<uint32_t>(i ^ (i >> 32)) * 2654435761u ^ seed;
  h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
  return h;
}

// kind 0: any byte (two E2M1 codes); 1: UE4M3 scales in [2^-2, 2^2); 2: f32 normal-ish of
// scale `scale`; 3: bf16 uniform of scale `scale`.
__global__ void fill_kernel(void* p, int64_t n, uint32_t seed, int kind, float scale) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint32_t h = mix(i, seed);
    if (kind == 0) static_cast<uint8_t*>(p)[i] = h & 0xff;
    if (kind == 1)
      static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(((5 + h % 4) << 3) | (h >> 8 & 7));
    const float u = (static_cast<float>(h >> 8) / 16777216.0f - 0.5f) * 3.4641f;  // unit variance
    if (kind == 2) static_cast<float*>(p)[i] = u * scale;
    if (kind == 3) static_cast<uint16_t*>(p)[i] = float_to_bf16(u * scale);
  }
}

void fill(const TensorView& t, uint32_t seed, int kind, float scale = 1.0f) {
  fill_kernel<<<1024, 256>>>(t.data, t.numel(), seed, kind, scale);
  DSV4_CUDA_CHECK(cudaGetLastError());
}

struct DeviceNvfp4 {
  Tensor packed, scale, global;
  // in_host_memory: codes and block scales in mapped pinned host memory (expert offload).
  // filled false: left as allocated (a copy's destination).
  DeviceNvfp4(int64_t g, int64_t n, int64_t k, uint32_t seed, bool in_host_memory = false,
              bool filled = true)
      : packed((in_host_memory ? mapped_host_tensor : device_tensor)(DType::kU8, {g, n, k / 2})),
        scale((in_host_memory ? mapped_host_tensor : device_tensor)(DType::kU8, {g, n, k / 16})),
        global(device_tensor(DType::kF32, {g})) {
    if (!filled) return;
    fill(packed.view(), seed, 0);
    fill(scale.view(), seed + 1, 1);
    // |e2m1 · ue4m3| averages ~2, so outputs of unit-variance inputs keep unit scale.
    std::vector<float> g_host(g, 0.5f / std::sqrt(static_cast<float>(k)));
    DSV4_CUDA_CHECK(cudaMemcpy(global.view().data, g_host.data(), 4 * g, cudaMemcpyHostToDevice));
  }
  format::Nvfp4View view() const { return {packed.view(), scale.view(), global.view()}; }
  // Copies to the host; `keep` owns the copies (reserved: views must not move).
  format::Nvfp4View host_view(std::vector<Tensor>& keep) const {
    for (const Tensor* t : {&packed, &scale, &global}) keep.push_back(to_host(t->view()));
    const size_t n = keep.size();
    return {keep[n - 3].view(), keep[n - 2].view(), keep[n - 1].view()};
  }
};

constexpr int64_t kMaxTokens = 8192;  // of an input's token ids (hash routing)
constexpr int64_t kVocab = 4096;      // rows of a hash layer's tid2eid

struct Layer {
  LayerShape shape;
  Tensor gate, bias;
  DeviceNvfp4 w13, w2, shared_w13, shared_w2;
  bool routed_in_host_memory;
  // Hash routing (V4's first layers): tid2eid [kVocab, K] (K distinct experts a row) and each
  // input's token ids [kInputs, kMaxTokens]; both empty for score routing.
  Tensor tid2eid, token_ids;
  Layer(const LayerShape& s, bool routed_in_host, bool hash)
      : shape(s),
        gate(device_tensor(DType::kF32, {s.n_experts, s.dim})),
        bias(device_tensor(DType::kF32, {s.n_experts})),
        w13(s.n_experts, 2 * s.ffn, s.dim, 11, routed_in_host),
        w2(s.n_experts, s.dim, s.ffn, 21, routed_in_host),
        shared_w13(1, 2 * s.ffn, s.dim, 31),
        shared_w2(1, s.dim, s.ffn, 41),
        routed_in_host_memory(routed_in_host) {
    fill(gate.view(), 5, 2, 1.0f / std::sqrt(static_cast<float>(s.dim)));
    fill(bias.view(), 6, 2, 0.05f);
    if (!hash) return;
    std::vector<int64_t> table(kVocab * s.k_used), ids(kInputs * kMaxTokens);
    for (int64_t v = 0; v < kVocab; ++v) {  // 41·k mod E is distinct for k < K (41 odd, 41·K < E)
      for (int64_t k = 0; k < s.k_used; ++k)
        table[v * s.k_used + k] = (37 * v + 41 * k) % s.n_experts;
    }
    for (int64_t i = 0; i < kInputs * kMaxTokens; ++i) ids[i] = (7919 * i + 13) % kVocab;
    tid2eid = device_tensor(DType::kI64, {kVocab, s.k_used});
    token_ids = device_tensor(DType::kI64, {kInputs, kMaxTokens});
    DSV4_CUDA_CHECK(
        cudaMemcpy(tid2eid.view().data, table.data(), 8 * table.size(), cudaMemcpyHostToDevice));
    DSV4_CUDA_CHECK(
        cudaMemcpy(token_ids.view().data, ids.data(), 8 * ids.size(), cudaMemcpyHostToDevice));
  }
  bool hash() const { return !tid2eid.empty_tensor(); }
  MoeWeightsView view() const {
    return {gate.view(),     hash() ? TensorView{} : bias.view(),
            tid2eid.view(),  w13.view(),
            w2.view(),       shared_w13.view(),
            shared_w2.view()};
  }
  // Input i's token ids [T] (hash routing), or an empty view.
  TensorView ids(int i, int64_t n_tokens) const {
    if (!hash()) return TensorView{};
    DSV4_CHECK(n_tokens <= kMaxTokens, "moe_bench: hash routing up to %lld tokens",
               static_cast<long long>(kMaxTokens));
    return TensorView::contiguous(token_ids.view().data_as<int64_t>() + (i % kInputs) * kMaxTokens,
                                  DType::kI64, Device::kCuda, {n_tokens});
  }
  int64_t expert_bytes() const { return 3 * shape.dim * shape.ffn * 9 / 16; }
};

double median_us(const std::function<void(int)>& run) {
  cudaEvent_t start, stop;
  DSV4_CUDA_CHECK(cudaEventCreate(&start));
  DSV4_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < 3; ++i) run(i);
  std::vector<double> us;
  for (int i = 0; i < kReps; ++i) {
    DSV4_CUDA_CHECK(cudaEventRecord(start, cudaStreamPerThread));
    run(i);
    DSV4_CUDA_CHECK(cudaEventRecord(stop, cudaStreamPerThread));
    DSV4_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    DSV4_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    us.push_back(1000.0 * ms);
  }
  DSV4_CUDA_CHECK(cudaEventDestroy(start));
  DSV4_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

// Host-to-device copy from pinned memory, bytes a second: what PCIe gives offloaded experts.
double measure_host_to_device() {
  const int64_t bytes = int64_t{1} << 30;
  Tensor host = mapped_host_tensor(DType::kU8, {bytes}),
         device = device_tensor(DType::kU8, {bytes});
  std::memset(host.view().data, 1, bytes);
  const double us = median_us([&](int) {
    DSV4_CUDA_CHECK(cudaMemcpyAsync(device.view().data, host.view().data, bytes,
                                    cudaMemcpyHostToDevice, cudaStreamPerThread));
  });
  return bytes / (us * 1e-6);
}

double measure_bandwidth() {
  const int64_t bytes = int64_t{1} << 30;
  Tensor a = device_tensor(DType::kU8, {bytes}), b = device_tensor(DType::kU8, {bytes});
  fill(a.view(), 1, 0);
  const double us = median_us([&](int) {
    DSV4_CUDA_CHECK(cudaMemcpyAsync(b.view().data, a.view().data, bytes, cudaMemcpyDeviceToDevice,
                                    cudaStreamPerThread));
  });
  return 2.0 * bytes / (us * 1e-6);
}

// cuBLAS bf16 8192³ on random data, TFLOP/s·1e12; 0 when libcublas.so.13 is not there.
double measure_bf16_peak() {
  const Cublas cublas = open_cublas();
  if (!cublas.ok()) return 0.0;
  constexpr int n = 8192;
  Tensor a = device_tensor(DType::kBF16, {n, n}), b = device_tensor(DType::kBF16, {n, n});
  Tensor c = device_tensor(DType::kBF16, {n, n});
  fill(a.view(), 2, 3), fill(b.view(), 3, 3);
  const double us = median_us([&](int) {
    cublas_gemm(cublas, a.view().data, b.view().data, c.view().data, n, n, n, 1.0f);
  });
  return 2.0 * n * n * n / (us * 1e-6);
}

// The layer's weights copied to the host once, for the CPU reference.
struct HostLayer {
  std::vector<Tensor> keep;
  MoeWeightsView view;
  explicit HostLayer(const Layer& l) {
    keep.reserve(15);
    keep.push_back(to_host(l.gate.view()));
    keep.push_back(to_host(l.bias.view()));
    keep.push_back(l.hash() ? to_host(l.tid2eid.view()) : Tensor());
    view = MoeWeightsView{keep[0].view(),
                          l.hash() ? TensorView{} : keep[1].view(),
                          keep[2].view(),
                          l.w13.host_view(keep),
                          l.w2.host_view(keep),
                          l.shared_w13.host_view(keep),
                          l.shared_w2.host_view(keep)};
  }
};

// Both CUDA paths against one CPU moe_ffn run at T tokens: prints the max row relative errors.
void check_against_cpu(const Layer& layer, const HostLayer& host, const MoeConfig& cfg,
                       int64_t n_tokens) {
  const LayerShape& s = layer.shape;
  Tensor x = device_tensor(DType::kF32, {n_tokens, s.dim});
  Tensor y = device_tensor(DType::kF32, {n_tokens, s.dim});
  fill(x.view(), 77, 2);
  Tensor x_host = to_host(x.view());
  const Tensor ids_host = layer.hash() ? to_host(layer.ids(0, n_tokens)) : Tensor();
  Tensor y_cpu = Tensor::host(DType::kF32, {n_tokens, s.dim});
  DSV4_CHECK(
      kernels::moe_ffn(x_host.view(), ids_host.view(), host.view, cfg, TensorView{}, y_cpu.view())
          .ok(),
      "CPU moe_ffn failed");
  Tensor ws =
      device_tensor(DType::kU8, {kernels::moe_ffn_workspace_bytes(n_tokens, layer.view(), cfg)});
  for (MoePath path : {MoePath::kFused, MoePath::kGrouped}) {
    const Status st = kernels::cuda::moe::moe_ffn_on_path(
        x.view(), layer.ids(0, n_tokens), layer.view(), cfg, ws.view(), y.view(), path);
    const double err = !st.ok()
                           ? -1.0
                           : testing::max_row_rel_error(to_host(y.view()).data_as<float>(),
                                                        y_cpu.data_as<float>(), n_tokens, s.dim);
    std::printf("check %s %s %s T=%lld vs CPU: max row rel err %.2e %s %s\n", s.name,
                cfg.mode == MoeMode::kW4A16 ? "W4A16" : "W4A4",
                plan_name(path, cfg, s, n_tokens).c_str(), static_cast<long long>(n_tokens), err,
                err < 0      ? "NOT RUN"
                : err < 2e-2 ? "OK"
                             : "FAIL",
                st.message().c_str());
  }
}

// Distinct routed experts of the last run (read back from the workspace's counts).
int64_t touched_experts(const Tensor& ws, const kernels::cuda::moe::MoeWorkspace& plan) {
  std::vector<int> counts(plan.n_experts);
  DSV4_CUDA_CHECK(cudaMemcpy(counts.data(), static_cast<char*>(ws.view().data) + plan.counts,
                             4 * plan.n_experts, cudaMemcpyDeviceToHost));
  return std::count_if(counts.begin(), counts.end(), [](int c) { return c > 0; });
}

// The routing front alone (memset, logits, select, permute; at T ≤ kSmallRouteTokens the two
// launches of route_small.cu) on the workspace of a run, graph-replayed: the part of every path
// that is not expert GEMMs, measured rather than estimated.
double route_us(const Layer& layer, const std::vector<Tensor>& xs, const Tensor& ws,
                const kernels::cuda::moe::MoeWorkspace& plan) {
  char* base = static_cast<char*>(ws.view().data);
  kernels::cuda::moe::RouterParams r{};
  r.gate = layer.gate.view().data_as<const float>();
  r.bias = layer.hash() ? nullptr : layer.bias.view().data_as<const float>();
  r.tid2eid = layer.tid2eid.view().data_as<const int64_t>();
  r.n_tokens = static_cast<int>(plan.n_tokens);
  r.dim = static_cast<int>(plan.dim);
  r.n_experts = static_cast<int>(plan.n_experts);
  r.k_used = static_cast<int>(plan.k_used);
  r.logits_splits = plan.logits_splits;
  r.route_scale = 1.0f;
  r.logits = reinterpret_cast<float*>(base + plan.logits);
  r.sel_expert = reinterpret_cast<int*>(base + plan.sel_expert);
  r.sel_weight = reinterpret_cast<float*>(base + plan.sel_weight);
  r.counts = reinterpret_cast<int*>(base + plan.counts);
  const kernels::cuda::moe::PermuteOutputs out{
      reinterpret_cast<int*>(base + plan.offsets), reinterpret_cast<int*>(base + plan.active),
      reinterpret_cast<int*>(base + plan.row_token), reinterpret_cast<int*>(base + plan.row_of)};
  auto route = [&](int i) {
    r.x = xs[i % kInputs].view().data_as<const float>();
    r.token_ids = layer.ids(i, r.n_tokens).data_as<const int64_t>();
    if (r.n_tokens <= kernels::cuda::moe::kSmallRouteTokens) {  // as moe_ffn_on_path chooses
      kernels::cuda::moe::launch_route_small(r, out, cudaStreamPerThread);
      return;
    }
    DSV4_CUDA_CHECK(cudaMemsetAsync(r.counts, 0, 4 * (plan.n_experts + 1), cudaStreamPerThread));
    kernels::cuda::moe::launch_router(r, cudaStreamPerThread);
    kernels::cuda::moe::launch_permute(r.sel_expert, r.counts, r.n_tokens, r.k_used, r.n_experts,
                                       out.offsets, out.active, out.row_token, out.row_of,
                                       cudaStreamPerThread);
  };
  // As a replayed graph, like the layer in decode: events around direct launches would count the
  // host's submission of each launch.
  std::vector<cudaGraphExec_t> graphs(kInputs);
  for (int i = 0; i < kInputs; ++i) {
    cudaGraph_t graph;
    DSV4_CUDA_CHECK(cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeThreadLocal));
    route(i);
    DSV4_CUDA_CHECK(cudaStreamEndCapture(cudaStreamPerThread, &graph));
    DSV4_CUDA_CHECK(cudaGraphInstantiate(&graphs[i], graph, 0));
    DSV4_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  const double us = median_us(
      [&](int i) { DSV4_CUDA_CHECK(cudaGraphLaunch(graphs[i % kInputs], cudaStreamPerThread)); });
  for (cudaGraphExec_t g : graphs) DSV4_CUDA_CHECK(cudaGraphExecDestroy(g));
  return us;
}

// The rates the floors divide by: HBM copy, host-to-device (0 when the experts are on the
// device), cuBLAS bf16.
struct Ceilings {
  double bandwidth, host_to_device, peak;
};

void run_tokens(const Layer& layer, const MoeConfig& cfg, int64_t n_tokens, MoePath path,
                const Ceilings& ceilings) {
  const LayerShape& s = layer.shape;
  std::vector<Tensor> xs;
  for (int i = 0; i < kInputs; ++i) {
    xs.push_back(device_tensor(DType::kF32, {n_tokens, s.dim}));
    fill(xs.back().view(), 100 + i, 2);
  }
  Tensor y = device_tensor(DType::kF32, {n_tokens, s.dim});
  const auto plan = kernels::cuda::moe::plan_workspace(n_tokens, layer.view(), cfg);
  Tensor ws = device_tensor(DType::kU8, {plan.total_bytes});
  auto run = [&](int i) {
    const Status st =
        kernels::cuda::moe::moe_ffn_on_path(xs[i % kInputs].view(), layer.ids(i, n_tokens),
                                            layer.view(), cfg, ws.view(), y.view(), path);
    DSV4_CHECK(st.ok(), "moe_ffn: %s", st.message().c_str());
  };
  run(0);
  DSV4_CUDA_CHECK(cudaDeviceSynchronize());
  const double us = median_us(run);
  const int64_t touched = touched_experts(ws, plan);
  const double routing_us = route_us(layer, xs, ws, plan);
  double graph_us = 0.0;
  if (path == MoePath::kFused && cfg.mode == MoeMode::kW4A16) {
    std::vector<cudaGraphExec_t> graphs(kInputs);
    for (int i = 0; i < kInputs; ++i) {
      cudaGraph_t graph;
      DSV4_CUDA_CHECK(
          cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeThreadLocal));
      run(i);
      DSV4_CUDA_CHECK(cudaStreamEndCapture(cudaStreamPerThread, &graph));
      DSV4_CUDA_CHECK(cudaGraphInstantiate(&graphs[i], graph, 0));
      DSV4_CUDA_CHECK(cudaGraphDestroy(graph));
    }
    graph_us = median_us(
        [&](int i) { DSV4_CUDA_CHECK(cudaGraphLaunch(graphs[i % kInputs], cudaStreamPerThread)); });
    for (cudaGraphExec_t g : graphs) DSV4_CUDA_CHECK(cudaGraphExecDestroy(g));
  }
  // The touched routed experts (over PCIe when in host memory) and the shared one.
  const double routed_bytes = static_cast<double>(touched) * layer.expert_bytes();
  const double flops = 2.0 * n_tokens * (s.k_used + 1) * 3.0 * s.dim * s.ffn;
  const double mem_floor = (layer.routed_in_host_memory ? routed_bytes / ceilings.host_to_device
                                                        : routed_bytes / ceilings.bandwidth) *
                               1e6 +
                           layer.expert_bytes() / ceilings.bandwidth * 1e6;
  const double compute_floor = ceilings.peak > 0 ? flops / ceilings.peak * 1e6 : 0;
  const double floor_us = std::max(mem_floor, compute_floor);
  const double best = graph_us > 0 ? std::min(us, graph_us) : us;
  std::printf("| %s | %s | %s | %lld | %lld | %.1f | %s | %.1f | %.1f (%s) | %.2f |\n", s.name,
              cfg.mode == MoeMode::kW4A16 ? "W4A16" : "W4A4",
              plan_name(path, cfg, s, n_tokens).c_str(), static_cast<long long>(n_tokens),
              static_cast<long long>(touched), us,
              graph_us > 0 ? std::to_string(graph_us).substr(0, 7).c_str() : "-", routing_us,
              floor_us, mem_floor >= compute_floor ? "mem" : "bf16", best / floor_us);
  if (layer.routed_in_host_memory) {
    // What the model does for an offloaded layer (model/moe.cpp): below kCopyOffloadedLayerTokens
    // the op copies the experts it touches to the device first (a kernel); from there the
    // stacks' codes and block scales are copied whole by the copy engines, then the layer runs.
    const DeviceNvfp4 w13(s.n_experts, 2 * s.ffn, s.dim, 0, false, false),
        w2(s.n_experts, s.dim, s.ffn, 0, false, false);
    MoeWeightsView touched_view = layer.view();
    touched_view.touched_copies = {w13.packed.view(), w13.scale.view(), w2.packed.view(),
                                   w2.scale.view()};
    const double touched_us = median_us([&](int i) {
      const Status st =
          kernels::cuda::moe::moe_ffn_on_path(xs[i % kInputs].view(), layer.ids(i, n_tokens),
                                              touched_view, cfg, ws.view(), y.view(), path);
      DSV4_CHECK(st.ok(), "moe_ffn: %s", st.message().c_str());
    });
    std::printf(
        "| %s | %s | %s, touched copied | %lld | %lld | %.1f | - | - | %.1f (mem) | %.2f |\n",
        s.name, cfg.mode == MoeMode::kW4A16 ? "W4A16" : "W4A4",
        plan_name(path, cfg, s, n_tokens).c_str(), static_cast<long long>(n_tokens),
        static_cast<long long>(touched), touched_us, mem_floor, touched_us / mem_floor);
    MoeWeightsView copied = layer.view();
    copied.w13.packed = w13.packed.view(), copied.w13.block_scale = w13.scale.view();
    copied.w2.packed = w2.packed.view(), copied.w2.block_scale = w2.scale.view();
    const double copied_us = median_us([&](int i) {
      for (auto [from, to] : {std::pair{&layer.w13.packed, &w13.packed},
                              {&layer.w13.scale, &w13.scale},
                              {&layer.w2.packed, &w2.packed},
                              {&layer.w2.scale, &w2.scale}}) {
        DSV4_CUDA_CHECK(cudaMemcpyAsync(to->view().data, from->view().data, from->view().bytes(),
                                        cudaMemcpyHostToDevice, cudaStreamPerThread));
      }
      const Status st = kernels::cuda::moe::moe_ffn_on_path(
          xs[i % kInputs].view(), layer.ids(i, n_tokens), copied, cfg, ws.view(), y.view(), path);
      DSV4_CHECK(st.ok(), "moe_ffn: %s", st.message().c_str());
    });
    const double all_bytes = static_cast<double>(s.n_experts) * layer.expert_bytes();
    const double copy_floor = all_bytes / ceilings.host_to_device * 1e6;
    std::printf(
        "| %s | %s | %s, copied first | %lld | %lld | %.1f | - | - | %.1f (copy) | %.2f |\n",
        s.name, cfg.mode == MoeMode::kW4A16 ? "W4A16" : "W4A4",
        plan_name(path, cfg, s, n_tokens).c_str(), static_cast<long long>(n_tokens),
        static_cast<long long>(s.n_experts), copied_us, copy_floor, copied_us / copy_floor);
  }
  std::fflush(stdout);
}

std::vector<int64_t> parse_list(const char* text) {
  std::vector<int64_t> v;
  for (const char* p = text; *p;) {
    v.push_back(std::strtoll(p, nullptr, 10));
    p = std::strchr(p, ',');
    if (!p) break;
    ++p;
  }
  return v;
}

int run_main(int argc, char** argv) {
  std::vector<int64_t> tokens = {1, 8, 64, 128, 512, 2048, 8192};
  std::string shapes = "flash,pro", modes = "w4a16,w4a4", paths, experts = "device",
              routing = "score";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--tokens") == 0) tokens = parse_list(argv[i + 1]);
    if (std::strcmp(argv[i], "--shapes") == 0) shapes = argv[i + 1];
    if (std::strcmp(argv[i], "--modes") == 0) modes = argv[i + 1];
    if (std::strcmp(argv[i], "--paths") == 0) paths = argv[i + 1];
    if (std::strcmp(argv[i], "--experts") == 0) experts = argv[i + 1];
    if (std::strcmp(argv[i], "--routing") == 0) routing = argv[i + 1];
  }
  const bool routed_in_host = experts == "host";
  auto runs_path = [&paths](MoePath path, int64_t t) {
    if (paths.empty()) return path == MoePath::kFused ? t <= 512 : t >= 8;
    return paths.find(path == MoePath::kFused ? "fused" : "grouped") != std::string::npos;
  };
  cudaDeviceProp prop;
  DSV4_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const Ceilings ceilings{measure_bandwidth(), routed_in_host ? measure_host_to_device() : 0.0,
                          measure_bf16_peak()};
  std::printf("device %s, %d SMs; D2D copy %.0f GB/s (read + write); cuBLAS bf16 %.0f TFLOP/s\n",
              prop.name, prop.multiProcessorCount, ceilings.bandwidth / 1e9, ceilings.peak / 1e12);
  if (routed_in_host) {
    std::printf("routed experts in mapped host memory; pinned host-to-device copy %.1f GB/s\n",
                ceilings.host_to_device / 1e9);
  }
  const LayerShape all[] = {{"flash", 4096, 2048, 256, 6}, {"pro", 7168, 3072, 384, 6}};
  for (const LayerShape& s : all) {
    if (shapes.find(s.name) == std::string::npos) continue;
    const Layer layer(s, routed_in_host, routing == "hash");
    const HostLayer host(layer);
    for (MoeMode mode : {MoeMode::kW4A16, MoeMode::kW4A4}) {
      if (modes.find(mode == MoeMode::kW4A16 ? "w4a16" : "w4a4") == std::string::npos) continue;
      const MoeConfig cfg{static_cast<int>(s.k_used), 2.5f, 10.0f, mode};
      check_against_cpu(layer, host, cfg, 3);
      std::printf(
          "| shape | mode | path | T | experts | median us | graph us | route us | floor us | "
          "ratio |\n");
      std::printf("|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
      for (int64_t t : tokens) {
        for (MoePath path : {MoePath::kFused, MoePath::kGrouped}) {
          if (runs_path(path, t)) run_tokens(layer, cfg, t, path, ceilings);
        }
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace dsv4::bench

int main(int argc, char** argv) { return dsv4::bench::run_main(argc, argv); }

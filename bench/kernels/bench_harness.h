// What the kernel benchmarks share: their argument lists, device tensors and the hash their
// random fills draw from, the median of repeated CUDA-event timings, a call's time inside a
// replayed CUDA graph (the decode use, so host launch cost is not counted), and the copy
// bandwidth every floor is measured against in the same program.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/buffer.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/stream.h"

namespace dsv4::bench {

inline constexpr int kBatch = 20;    // calls in one timed graph
inline constexpr int kWarmup = 3;
inline constexpr int kRepeats = 20;  // timings a median is taken of

// "a,b,..." of positive integers (token counts, rows).
inline std::vector<int64_t> parse_list(const char* text) {
  std::vector<int64_t> values;
  for (const char* c = text; *c != '\0';) {
    char* end = nullptr;
    values.push_back(std::strtoll(c, &end, 10));
    DSV4_CHECK(values.back() > 0 && end != c, "bad list %s (want positive integers, a,b,...)", text);
    c = *end == ',' ? end + 1 : end;
  }
  return values;
}

// A well-mixed 32-bit hash of (index, seed): the random fills' source, the same on every run.
__device__ __forceinline__ uint32_t fill_hash(int64_t i, uint32_t seed) {
  uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  return h;
}

inline Tensor device_tensor(DType dtype, Shape shape) {
  Result<Tensor> t = Tensor::empty(dtype, shape, Device::kCuda);
  DSV4_CHECK(t.ok(), "allocation of %s failed", shape.to_string().c_str());
  return std::move(t).value();
}

// Median over kRepeats of `launch` (events around it on the op stream), after kWarmup.
template <typename F>
double median_ms(F&& launch) {
  const cudaStream_t stream = kernels::cuda::op_stream();
  cudaEvent_t start, stop;
  DSV4_CUDA_CHECK(cudaEventCreate(&start));
  DSV4_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < kWarmup; ++i) launch();
  std::vector<float> ms(kRepeats);
  for (int i = 0; i < kRepeats; ++i) {
    DSV4_CUDA_CHECK(cudaEventRecord(start, stream));
    launch();
    DSV4_CUDA_CHECK(cudaEventRecord(stop, stream));
    DSV4_CUDA_CHECK(cudaEventSynchronize(stop));
    DSV4_CUDA_CHECK(cudaEventElapsedTime(&ms[i], start, stop));
  }
  DSV4_CUDA_CHECK(cudaEventDestroy(start));
  DSV4_CUDA_CHECK(cudaEventDestroy(stop));
  std::sort(ms.begin(), ms.end());
  return ms[kRepeats / 2];
}

// DSV4_BENCH_PROFILE=1: run each variant once, untimed (for ncu's --launch-skip).
inline bool profile_mode() {
  static const bool on = [] {
    const char* v = std::getenv("DSV4_BENCH_PROFILE");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }();
  return on;
}

// µs per call of run(i), i = 0..kBatch-1 captured in one graph (run(0) once eagerly first, so
// one-time setup stays out of the capture). Profile mode: run(0) once, no timing.
template <typename F>
double graph_us_per_call(F&& run) {
  const cudaStream_t stream = kernels::cuda::op_stream();
  run(0);
  if (profile_mode()) {
    DSV4_CUDA_CHECK(cudaStreamSynchronize(stream));
    return 1.0;
  }
  cudaGraph_t graph;
  DSV4_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  for (int i = 0; i < kBatch; ++i) run(i);
  DSV4_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  DSV4_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const double ms = median_ms([&] { DSV4_CUDA_CHECK(cudaGraphLaunch(exec, stream)); });
  DSV4_CUDA_CHECK(cudaGraphExecDestroy(exec));
  DSV4_CUDA_CHECK(cudaGraphDestroy(graph));
  return 1000.0 * ms / kBatch;
}

// Bytes read + written by a 1 GiB device-to-device copy, per second.
inline double measure_copy_bandwidth() {
  const int64_t bytes = 1ll << 30;
  Tensor a = device_tensor(DType::kU8, {bytes}), b = device_tensor(DType::kU8, {bytes});
  const double us = 1000.0 * median_ms([&] {
    DSV4_CUDA_CHECK(cudaMemcpyAsync(b.view().data, a.view().data, bytes, cudaMemcpyDeviceToDevice,
                                    kernels::cuda::op_stream()));
  });
  return 2.0 * bytes / (us * 1e-6);
}

}  // namespace dsv4::bench

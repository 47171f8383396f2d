// The fast profile's attention ops at V4-Flash shapes against the exact ones, same run:
// sparse_attention_bf16 vs sparse_attention (64 heads of 512, a 128-row window + the indexer's
// 512 picks = 640 candidates a query) and indexer_scores_fp8 vs indexer_scores (64 heads of
// 128), for a 2048-token prefill and decode steps of B = 1, 8, 32 rows (at a 64k context: 16384
// compressed entries). Each row prints the median time, the rate, and the floor it is measured
// against: the bf16 (attention) or FP8 (indexer) tensor-core rate, taken as cuBLAS's bf16 GEMM
// rate measured here (8192³ on random data; FP8's dense rate is twice that), or the bytes a
// decode call must read at the measured copy bandwidth, whichever is larger. Before timing, each
// fast op's result is checked against the exact op's on the same inputs
// (tests/testing/tolerance.h).
//
// Usage: fast_attention_bench   (no arguments; DSV4_BENCH_PROFILE=1 runs each call once)
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "base/row_error.h"
#include "bench_harness.h"
#include "cublas_dl.h"
#include "kernels/ops.h"
#include "testing/device.h"
#include "testing/tolerance.h"

namespace dsv4::bench {
namespace {

constexpr int64_t kHeads = 64, kHeadDim = 512, kWindow = 128, kTopk = 512;  // V4-Flash
constexpr int64_t kIndexHeads = 64, kIndexDim = 128;
constexpr int64_t kPrefill = 2048;
constexpr int64_t kDecodeEntries = 16384;  // CSA entries of a 64k-token context

__global__ void fill_uniform(float* x, int64_t n, uint32_t seed, float lo, float hi) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = lo + (hi - lo) * (fill_hash(i, seed) >> 8) * (1.0f / 16777216.0f);
  }
}
__global__ void fill_bf16(__nv_bfloat16* x, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    x[i] = __float2bfloat16((fill_hash(i, seed) >> 8) * (1.0f / 16777216.0f) - 0.5f);
  }
}
// indices[t, j] = a row in [0, n_rows): random, or for the window the query's last kWindow rows.
__global__ void fill_indices(int32_t* idx, int64_t n_tokens, int64_t k, int64_t n_rows,
                             uint32_t seed, bool window) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n_tokens * k;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t t = i / k, j = i % k;
    idx[i] = static_cast<int32_t>(window ? (t + j) % n_rows : fill_hash(i, seed) % n_rows);
  }
}

Tensor uniform(Shape shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  Tensor t = device_tensor(DType::kF32, shape);
  fill_uniform<<<1024, 256, 0, kernels::cuda::op_stream()>>>(t.view().data_as<float>(), t.numel(),
                                                             seed, lo, hi);
  return t;
}
Tensor indices(int64_t n_tokens, int64_t k, int64_t n_rows, uint32_t seed, bool window) {
  Tensor t = device_tensor(DType::kI32, {n_tokens, k});
  fill_indices<<<1024, 256, 0, kernels::cuda::op_stream()>>>(t.view().data_as<int32_t>(), n_tokens,
                                                             k, n_rows, seed, window);
  return t;
}

double row_error(const Tensor& a, const Tensor& b, int64_t n_cols) {
  const Tensor ha = testing::to_host(a.view()), hb = testing::to_host(b.view());
  return max_row_rel_error(ha.data_as<float>(), hb.data_as<float>(), a.numel() / n_cols, n_cols);
}

// cuBLAS's bf16 GEMM rate here, FLOP/s (8192³, random bf16 in [−0.5, 0.5)); 0 without cuBLAS.
double measure_bf16_rate() {
  const Cublas cublas = open_cublas();
  if (!cublas.ok()) return 0.0;
  constexpr int64_t n = 8192;
  Tensor a = device_tensor(DType::kBF16, {n, n}), w = device_tensor(DType::kBF16, {n, n});
  Tensor c = device_tensor(DType::kBF16, {n, n});
  fill_bf16<<<1024, 256, 0, kernels::cuda::op_stream()>>>(
      static_cast<__nv_bfloat16*>(a.view().data), n * n, 1u);
  fill_bf16<<<1024, 256, 0, kernels::cuda::op_stream()>>>(
      static_cast<__nv_bfloat16*>(w.view().data), n * n, 2u);
  const double ms = median_ms(
      [&] { cublas_gemm(cublas, a.view().data, w.view().data, c.view().data, n, n, n, 1.0f); });
  return 2.0 * n * n * n / (ms * 1e-3);
}

// µs a call: replayed in a CUDA graph for a decode (its use), else timed alone.
template <typename F>
double call_us(bool decode, F&& run) {
  return decode ? graph_us_per_call([&](int) { run(); }) : 1000.0 * median_ms(run);
}

struct Timed {
  double fast_us, exact_us, error;  // error: the fast result's worst row against the exact one
};

// The fast and the exact call on the same inputs (outputs `fast`, `exact`, rows of their last
// dim), checked against `bound`, then timed.
template <typename Fast, typename Exact>
Timed time_against_exact(bool decode, Fast&& run_fast, Exact&& run_exact, const Tensor& fast,
                         const Tensor& exact, double bound) {
  run_fast();
  run_exact();
  const double error = row_error(fast, exact, fast.shape()[fast.shape().rank - 1]);
  DSV4_CHECK(error < bound, "fast op off the exact one by %.2e (bound %.0e)", error, bound);
  return {call_us(decode, run_fast), call_us(decode, run_exact), error};
}

struct Rates {
  double bf16 = 0.0, copy = 0.0;  // FLOP/s, bytes/s
};

// One row of the table: the fast and the exact call's µs (in a graph when decode), the fast
// one's rate, its floor (compute at `peak` or bytes at the copy rate) and the error against exact.
void report(const char* op, const char* shape, double flops, double bytes, double peak,
            const Rates& r, const Timed& timed) {
  const double fast_us = timed.fast_us, exact_us = timed.exact_us, error = timed.error;
  const double floor_us = std::max(flops / peak, bytes / r.copy) * 1e6;
  std::printf("| %-22s | %-34s | %9.1f | %9.1f | %6.1f | %7.1f | %9.1f | %5.2f | %7.2fx | %.2e |\n",
              op, shape, fast_us, floor_us, flops / fast_us * 1e-6, peak * 1e-12, exact_us,
              fast_us / floor_us, exact_us / fast_us, error);
}

void attention_row(const Rates& rates, int64_t n_tokens, bool decode) {
  // Window rows: the ring (decode) or the prompt's rows (prefill); extra rows: the entries.
  const int64_t n_window_rows = decode ? kWindow : n_tokens + kWindow;
  const int64_t n_entries = decode ? kDecodeEntries : n_tokens / 4;
  const Tensor q = uniform({n_tokens, kHeads, kHeadDim}, 11u);
  const Tensor kv = uniform({n_window_rows, kHeadDim}, 12u);
  const Tensor entries = uniform({n_entries, kHeadDim}, 13u);
  const Tensor window_idx = indices(n_tokens, kWindow, n_window_rows, 14u, true);
  const Tensor picks = indices(n_tokens, kTopk, n_entries, 15u, false);
  const Tensor sinks = uniform({kHeads}, 16u, -2.0f, 2.0f);
  const Tensor fast = device_tensor(DType::kF32, {n_tokens, kHeads, kHeadDim});
  const Tensor exact = device_tensor(DType::kF32, {n_tokens, kHeads, kHeadDim});
  kernels::SparseAttentionParams p;
  p.q = q.view();
  p.kv = kv.view();
  p.indices = window_idx.view();
  p.extra_kv = entries.view();
  p.extra_indices = picks.view();
  p.sinks = sinks.view();
  p.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  kernels::SparseAttentionParams pe = p;
  p.out = fast.view();
  pe.out = exact.view();
  auto run_fast = [&] { DSV4_CHECK(kernels::sparse_attention_bf16(p).ok(), "bf16 attention"); };
  auto run_exact = [&] { DSV4_CHECK(kernels::sparse_attention(pe).ok(), "exact attention"); };
  const Timed timed = time_against_exact(decode, run_fast, run_exact, fast, exact,
                                         testing::kBf16AttentionVsExactRelTol);
  const int64_t k = kWindow + kTopk;
  const double flops = 4.0 * n_tokens * kHeads * k * kHeadDim;
  // A decode call reads each query's candidate rows (f32) once, its queries and its output.
  const double bytes = 4.0 * n_tokens * (k * kHeadDim + 2 * kHeads * kHeadDim);
  char shape[64];
  std::snprintf(shape, sizeof shape, "%s T=%lld, H=64, Dh=512, K=640",
                decode ? "decode" : "prefill", (long long)n_tokens);
  report("sparse_attention_bf16", shape, flops, decode ? bytes : 0.0, rates.bf16, rates, timed);
}

void indexer_row(const Rates& rates, int64_t n_tokens, bool decode) {
  const int64_t n_entries = decode ? kDecodeEntries : n_tokens / 4;
  const Tensor q = uniform({n_tokens, kIndexHeads, kIndexDim}, 21u);
  const Tensor keys = uniform({n_entries, kIndexDim}, 22u);
  const Tensor weights = uniform({n_tokens, kIndexHeads}, 23u);
  const Tensor fast = device_tensor(DType::kF32, {n_tokens, n_entries});
  const Tensor exact = device_tensor(DType::kF32, {n_tokens, n_entries});
  const float q_scale = 1.0f / std::sqrt(float{kIndexDim}), w_scale = 0.125f;
  const kernels::IndexerScoreParams p{q.view(), keys.view(), weights.view(),
                                      q_scale,  w_scale,     fast.view()};
  const kernels::IndexerScoreParams pe{q.view(), keys.view(), weights.view(),
                                       q_scale,  w_scale,     exact.view()};
  auto run_fast = [&] { DSV4_CHECK(kernels::indexer_scores_fp8(p).ok(), "fp8 indexer"); };
  auto run_exact = [&] { DSV4_CHECK(kernels::indexer_scores(pe).ok(), "exact indexer"); };
  const Timed timed = time_against_exact(decode, run_fast, run_exact, fast, exact,
                                         testing::kFp8IndexerVsExactRelTol);
  const double flops = 2.0 * n_tokens * n_entries * kIndexHeads * kIndexDim;
  const double bytes =
      4.0 * (n_entries * kIndexDim + n_tokens * (kIndexHeads * kIndexDim + n_entries));
  char shape[64];
  std::snprintf(shape, sizeof shape, "%s T=%lld, HI=64, DI=128, N=%lld",
                decode ? "decode" : "prefill", (long long)n_tokens, (long long)n_entries);
  report("indexer_scores_fp8", shape, flops, decode ? bytes : 0.0, 2.0 * rates.bf16, rates, timed);
}

}  // namespace
}  // namespace dsv4::bench

int main() {
  using namespace dsv4::bench;
  Rates rates;
  rates.bf16 = measure_bf16_rate();
  rates.copy = measure_copy_bandwidth();
  DSV4_CHECK(rates.bf16 > 0.0, "no cuBLAS: the bf16 rate the floors need was not measured");
  std::printf("bf16 GEMM rate (cuBLAS 8192³, random): %.0f TFLOP/s; copy: %.2f TB/s\n",
              rates.bf16 * 1e-12, rates.copy * 1e-12);
  std::printf(
      "| op | shape | fast µs | floor µs | TFLOP/s | peak TFLOP/s | exact µs | ratio | "
      "vs exact | err vs exact |\n|---|---|---|---|---|---|---|---|---|---|\n");
  attention_row(rates, kPrefill, false);
  for (const int64_t b : {1, 8, 32}) attention_row(rates, b, true);
  indexer_row(rates, kPrefill, false);
  for (const int64_t b : {1, 8, 32}) indexer_row(rates, b, true);
  return 0;
}

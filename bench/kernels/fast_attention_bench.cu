// The fast profile's attention ops at V4-Flash shapes against the exact ones, same run:
// sparse_attention_bf16 vs sparse_attention (64 heads of 512, a 128-row window + the indexer's
// picks, at most 512) and indexer_scores_fp8 vs indexer_scores (64 heads of 128), for a
// 2048-token prefill in one call and in the engine's 256-query pieces (at 2048 and 32768
// positions), and decode steps of B = 1, 2, 8, 32 rows at contexts of 272, 2048 (the
// picks fill the top-k), 8192 and 65536 tokens (a CSA layer: context / 4 compressed entries,
// min(512, entries) picks), then the indexer's top-k over those entries and at a 1M-token
// context. Decode rows go as the engine's decode step sends them: each row's cache through the
// per-row address tables (kernels/ops.h, "Decode rows"). Each row of the table prints the median
// time, the rate, and the floor it is measured against: the bf16 (attention) or FP8 (indexer)
// tensor-core rate, taken as cuBLAS's bf16 GEMM rate measured here (8192³ on random data; FP8's
// dense rate is twice that), or the bytes a decode call must read at the measured copy bandwidth,
// whichever is larger. Before timing, each fast op's result is checked against the exact op's on
// the same inputs (tests/testing/tolerance.h), and the top-k's picks against the CPU's, bit for
// bit.
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
// The queries of one attention call of a prompt as the engine makes them: it attends a prompt
// 256 tokens at a time (model::AttentionCache::kDefaultStepTokens), over the window ring of
// those rows and the entries so far.
constexpr int64_t kPromptPiece = 256;
constexpr int64_t kRatio = 4;  // a CSA layer's tokens an entry

// A call's shape: T query rows at a context of `context` tokens; decode rows read their caches
// through address tables, a prefill its prompt's rows.
struct Call {
  int64_t n_tokens, context;
  bool decode;
  int64_t n_entries() const { return context / kRatio; }
  int64_t n_picks() const { return std::min(kTopk, n_entries()); }
};

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
// i64 [n] of one value on the device: every decode row's address of a shared buffer, or its
// position.
Tensor repeated(int64_t n, int64_t value) {
  Tensor host = Tensor::host(DType::kI64, {n});
  std::fill_n(host.data_as<int64_t>(), n, value);
  return testing::to_device(host.view());
}
int64_t address(const Tensor& t) {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.view().data));
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
  std::printf("| %-22s | %-38s | %9.1f | %9.1f | %6.1f | %7.1f | %9.1f | %5.2f | %7.2fx | %.2e |\n",
              op, shape, fast_us, floor_us, flops / fast_us * 1e-6, peak * 1e-12, exact_us,
              fast_us / floor_us, exact_us / fast_us, error);
}

void describe(char (&out)[96], const Call& s, const char* more) {
  std::snprintf(out, sizeof out, "%s T=%lld, ctx %lld, %s", s.decode ? "decode" : "prefill",
                (long long)s.n_tokens, (long long)s.context, more);
}

void attention_row(const Rates& rates, const Call& call) {
  // Window rows: the ring (decode) or the prompt's rows (prefill); extra rows: the entries.
  const int64_t n_tokens = call.n_tokens, n_entries = call.n_entries();
  const int64_t n_window_rows = call.decode ? kWindow : n_tokens + kWindow;
  const Tensor q = uniform({n_tokens, kHeads, kHeadDim}, 11u);
  const Tensor kv = uniform({n_window_rows, kHeadDim}, 12u);
  const Tensor entries = uniform({n_entries, kHeadDim}, 13u);
  const Tensor window_idx = indices(n_tokens, kWindow, n_window_rows, 14u, true);
  const Tensor picks = indices(n_tokens, call.n_picks(), n_entries, 15u, false);
  const Tensor sinks = uniform({kHeads}, 16u, -2.0f, 2.0f);
  const Tensor fast = device_tensor(DType::kF32, {n_tokens, kHeads, kHeadDim});
  const Tensor exact = device_tensor(DType::kF32, {n_tokens, kHeads, kHeadDim});
  // Decode rows: row t's ring and entries through the tables (here all the same buffers), of
  // which it holds (position + 1) / ratio entries.
  const Tensor kv_addresses = repeated(n_tokens, address(kv));
  const Tensor extra_addresses = repeated(n_tokens, address(entries));
  const Tensor positions = repeated(n_tokens, call.context - 1);
  kernels::SparseAttentionParams p;
  p.q = q.view();
  p.kv = kv.view();
  p.indices = window_idx.view();
  p.extra_kv = entries.view();
  p.extra_indices = picks.view();
  p.sinks = sinks.view();
  p.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  if (call.decode) {
    p.kv_addresses = kv_addresses.view();
    p.extra_addresses = extra_addresses.view();
    p.row_positions = positions.view();
    p.extra_ratio = kRatio;
  }
  kernels::SparseAttentionParams pe = p;
  p.out = fast.view();
  pe.out = exact.view();
  auto run_fast = [&] { DSV4_CHECK(kernels::sparse_attention_bf16(p).ok(), "bf16 attention"); };
  auto run_exact = [&] { DSV4_CHECK(kernels::sparse_attention(pe).ok(), "exact attention"); };
  const Timed timed = time_against_exact(call.decode, run_fast, run_exact, fast, exact,
                                         testing::kBf16AttentionVsExactRelTol);
  const int64_t k = kWindow + call.n_picks();
  const double flops = 4.0 * n_tokens * kHeads * k * kHeadDim;
  // A decode call reads each query's candidate rows (f32) once, its queries and its output.
  const double bytes = 4.0 * n_tokens * (k * kHeadDim + 2 * kHeads * kHeadDim);
  char more[48], text[96];
  std::snprintf(more, sizeof more, "K=%lld", (long long)k);
  describe(text, call, more);
  report("sparse_attention_bf16", text, flops, call.decode ? bytes : 0.0, rates.bf16, rates, timed);
}

void indexer_row(const Rates& rates, const Call& call) {
  const int64_t n_tokens = call.n_tokens, n_entries = call.n_entries();
  const Tensor q = uniform({n_tokens, kIndexHeads, kIndexDim}, 21u);
  const Tensor keys = uniform({n_entries, kIndexDim}, 22u);
  const Tensor weights = uniform({n_tokens, kIndexHeads}, 23u);
  const Tensor fast = device_tensor(DType::kF32, {n_tokens, n_entries});
  const Tensor exact = device_tensor(DType::kF32, {n_tokens, n_entries});
  const Tensor key_addresses = repeated(n_tokens, address(keys));
  const Tensor positions = repeated(n_tokens, call.context - 1);
  const float q_scale = 1.0f / std::sqrt(float{kIndexDim}), w_scale = 0.125f;
  kernels::IndexerScoreParams p{q.view(), keys.view(), weights.view(),
                                q_scale,  w_scale,     fast.view()};
  if (call.decode) {
    p.key_addresses = key_addresses.view();
    p.key_positions = positions.view();
    p.key_ratio = kRatio;
  }
  kernels::IndexerScoreParams pe = p;
  pe.scores = exact.view();
  auto run_fast = [&] { DSV4_CHECK(kernels::indexer_scores_fp8(p).ok(), "fp8 indexer"); };
  auto run_exact = [&] { DSV4_CHECK(kernels::indexer_scores(pe).ok(), "exact indexer"); };
  const Timed timed = time_against_exact(call.decode, run_fast, run_exact, fast, exact,
                                         testing::kFp8IndexerVsExactRelTol);
  const double flops = 2.0 * n_tokens * n_entries * kIndexHeads * kIndexDim;
  const double bytes =
      4.0 * (n_entries * kIndexDim + n_tokens * (kIndexHeads * kIndexDim + n_entries));
  char more[48], text[96];
  std::snprintf(more, sizeof more, "N=%lld", (long long)n_entries);
  describe(text, call, more);
  report("indexer_scores_fp8", text, flops, call.decode ? bytes : 0.0, 2.0 * rates.bf16, rates,
         timed);
}

// The indexer's picks of a decode step (topk by positions, as the engine calls it), checked
// against the CPU's bit for bit, then timed; no exact twin (one op for both profiles).
void topk_row(const Rates& rates, const Call& call) {
  const int64_t n_tokens = call.n_tokens, n_entries = call.n_entries(), k = call.n_picks();
  const Tensor scores = uniform({n_tokens, n_entries}, 31u);
  const Tensor positions = repeated(n_tokens, call.context - 1);
  const Tensor picks = device_tensor(DType::kI32, {n_tokens, k});
  auto run = [&] {
    DSV4_CHECK(kernels::topk(scores.view(), positions.view(), kRatio, picks.view()).ok(), "topk");
  };
  run();
  const Tensor host_scores = testing::to_host(scores.view());
  const Tensor host_positions = testing::to_host(positions.view());
  Tensor expected = Tensor::host(DType::kI32, {n_tokens, k});
  DSV4_CHECK(kernels::topk(host_scores.view(), host_positions.view(), kRatio, expected.view()).ok(),
             "cpu topk");
  const Tensor got = testing::to_host(picks.view());
  DSV4_CHECK(std::equal(got.data_as<int32_t>(), got.data_as<int32_t>() + got.numel(),
                        expected.data_as<int32_t>()),
             "topk: the device's picks differ from the CPU's");
  const double bytes = 4.0 * n_tokens * (n_entries + k);
  char more[48], text[96];
  std::snprintf(more, sizeof more, "N=%lld, K=%lld", (long long)n_entries, (long long)k);
  describe(text, call, more);
  report("topk", text, 0.0, bytes, 1.0, rates, {call_us(true, run), 0.0, 0.0});
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
  // A 2048-token prompt in one call, and the engine's 256-query pieces at the end of a 2048-
  // and a 32768-token prompt (the entries and the indexer's keys grow with the context).
  const std::vector<Call> prefill = {
      {kPrefill, kPrefill, false}, {kPromptPiece, 2048, false}, {kPromptPiece, 32768, false}};
  std::vector<Call> decode;
  for (const int64_t context : {272, 2048, 8192, 65536}) {
    for (const int64_t b : {1, 2, 8, 32}) decode.push_back({b, context, true});
  }
  for (const Call& s : prefill) attention_row(rates, s);
  for (const Call& s : decode) attention_row(rates, s);
  for (const Call& s : prefill) indexer_row(rates, s);
  for (const Call& s : decode) indexer_row(rates, s);
  for (const Call& s : decode) topk_row(rates, s);
  for (const int64_t b : {1, 8, 32}) topk_row(rates, {b, 1 << 20, true});  // V4's longest context
  return 0;
}

// The CUDA routing front of moe_ffn (kernels/cuda/moe/route_small.cu at T ≤ kSmallRouteTokens,
// route.cu + permute.cu above) against the CPU reference (label cuda), at V4-Flash's router shape
// (D = 4096, E = 256, K = 6) on fresh inputs whose logits are exact in f32 in any summation
// order (moe_test_layer.h), in the four routing regimes:
//   - the small router's scores against the CPU's sqrt(softplus) of the same logits (the
//     device's expf and log1pf ulps), and its ids and weights bit for bit cpu::moe_select's on
//     the device's scores: the selection is the CPU's, operation for operation;
//   - a hash-routed layer's scores (a logits block per (token, slot)) bit for bit the ones the
//     score kernel computes for the same (token, expert), and its weights cpu::moe_select's on
//     those;
//   - the permutation exactly the one its ids define (rows by group, stable in (token, slot),
//     group E the shared expert), the bf16 copy of x in the pair layout, the fused combine's
//     m-tile counts zeroed;
//   - the general router (T = 9, 64): ids cpu::moe_route's, weights within kCudaF32OpRelTol, the
//     same permutation rule.
// Every workspace byte is poisoned (0xFF) first, so an output the kernels skip shows.
//
// Dimension letters: T tokens, D model width, E routed experts, K experts per token,
// S = T·(K+1) grouped rows.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <vector>

#include "base/buffer.h"
#include "base/float_convert.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/moe/kernels.h"
#include "kernels/cuda/moe/moe_pipeline.h"
#include "moe_test_layer.h"
#include "testing/device.h"
#include "testing/random.h"
#include "testing/tolerance.h"

namespace dsv4::kernels {
namespace {

using dsv4::testing::to_device;
using moe_test::MoeTestLayer;
using moe_test::Routing;

constexpr int64_t kDim = 4096, kExperts = 256, kUsed = 6, kFfn = 2048;
constexpr float kRouteScale = 2.5f;

// What the routing front left in the workspace, on the host.
struct RouteResult {
  cuda::moe::MoeWorkspace ws;
  std::vector<float> scores;  // [T, E] (the small router's; of a hash layer only T·K entries)
  std::vector<int32_t> sel_expert, counts, offsets, active, row_token, row_of;
  std::vector<float> sel_weight;
  std::vector<uint16_t> x_bf16;     // [T, D] (the small router's copy, pair layout)
  std::vector<int32_t> mtile_done;  // [D/16]
};

template <typename T>
std::vector<T> read(const char* base, int64_t offset, int64_t n) {
  std::vector<T> v(n);
  EXPECT_EQ(cudaMemcpy(v.data(), base + offset, sizeof(T) * n, cudaMemcpyDeviceToHost),
            cudaSuccess);
  return v;
}

// The routing front as moe_ffn's W4A16 fused path runs it (moe_ffn.cu MoeSteps::front), on a
// poisoned workspace laid out by the op's own plan_workspace.
RouteResult run_route(const MoeTestLayer& layer, const Tensor& x_dev, const Tensor& ids_dev,
                      bool hash) {
  const int64_t n_tokens = x_dev.shape()[0];
  const Tensor gate = to_device(layer.gate.view()), bias = to_device(layer.bias.view());
  const Tensor tid2eid = to_device(layer.tid2eid.view());
  MoeWeightsView shapes{};  // plan_workspace reads the gate's and w2's shapes only
  shapes.gate = gate.view();
  shapes.w2.packed =
      TensorView::contiguous(nullptr, DType::kU8, Device::kCuda, {kExperts, kDim, kFfn / 2});
  RouteResult r;
  r.ws = cuda::moe::plan_workspace(n_tokens, shapes, MoeConfig{kUsed, kRouteScale, 0.0f});
  const Tensor ws = dsv4::testing::poisoned_device(DType::kU8, {r.ws.total_bytes});
  char* base = static_cast<char*>(ws.view().data);
  cuda::moe::RouterParams p{};
  p.x = x_dev.view().data_as<const float>();
  p.gate = gate.view().data_as<const float>();
  p.bias = hash ? nullptr : bias.view().data_as<const float>();
  p.tid2eid = hash ? tid2eid.view().data_as<const int64_t>() : nullptr;
  p.token_ids = ids_dev.view().data_as<const int64_t>();
  p.n_tokens = static_cast<int>(n_tokens);
  p.dim = static_cast<int>(kDim);
  p.n_experts = static_cast<int>(kExperts);
  p.k_used = static_cast<int>(kUsed);
  p.logits_splits = r.ws.logits_splits;
  p.route_scale = kRouteScale;
  p.logits = reinterpret_cast<float*>(base + r.ws.logits);
  p.sel_expert = reinterpret_cast<int*>(base + r.ws.sel_expert);
  p.sel_weight = reinterpret_cast<float*>(base + r.ws.sel_weight);
  p.counts = reinterpret_cast<int*>(base + r.ws.counts);
  p.x_bf16 = reinterpret_cast<uint16_t*>(base + r.ws.x_bf16);
  p.mtile_rows_done = reinterpret_cast<int*>(base + r.ws.mtile_done);
  p.n_mtiles = static_cast<int>(kDim / 16);
  const cuda::moe::PermuteOutputs out{
      reinterpret_cast<int*>(base + r.ws.offsets), reinterpret_cast<int*>(base + r.ws.active),
      reinterpret_cast<int*>(base + r.ws.row_token), reinterpret_cast<int*>(base + r.ws.row_of)};
  const bool small = n_tokens <= cuda::moe::kSmallRouteTokens;
  if (small) {
    cuda::moe::launch_route_small(p, out, cudaStreamPerThread);
  } else {
    EXPECT_EQ(cudaMemsetAsync(p.counts, 0, 4 * (kExperts + 1), cudaStreamPerThread), cudaSuccess);
    cuda::moe::launch_router(p, cudaStreamPerThread);
    cuda::moe::launch_permute(p.sel_expert, p.counts, p.n_tokens, p.k_used, p.n_experts,
                              out.offsets, out.active, out.row_token, out.row_of,
                              cudaStreamPerThread);
  }
  EXPECT_EQ(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
  const int64_t n_entries = n_tokens * (kUsed + 1);
  if (small) {
    r.scores = read<float>(base, r.ws.logits, n_tokens * kExperts);
    r.x_bf16 = read<uint16_t>(base, r.ws.x_bf16, n_tokens * kDim);
    r.mtile_done = read<int32_t>(base, r.ws.mtile_done, kDim / 16);
  }
  r.sel_expert = read<int32_t>(base, r.ws.sel_expert, n_entries);
  r.sel_weight = read<float>(base, r.ws.sel_weight, n_entries);
  r.counts = read<int32_t>(base, r.ws.counts, kExperts);
  r.offsets = read<int32_t>(base, r.ws.offsets, kExperts + 2);
  r.active = read<int32_t>(base, r.ws.active, kExperts + 2);
  r.row_token = read<int32_t>(base, r.ws.row_token, n_entries);
  r.row_of = read<int32_t>(base, r.ws.row_of, n_entries);
  return r;
}

// The permutation the ids [T, K+1] (slot K: the shared expert E) define: groups in order, rows
// of a group in (token, slot) order.
void expect_permutation_of_ids(const RouteResult& r, int64_t n_tokens) {
  const int64_t n_groups = kExperts + 1, slots = kUsed + 1;
  std::vector<int32_t> count(n_groups, 0);
  for (int32_t g : r.sel_expert) {
    ASSERT_TRUE(0 <= g && g < n_groups) << g;
    ++count[g];
  }
  for (int64_t e = 0; e < kExperts; ++e) EXPECT_EQ(r.counts[e], count[e]) << "expert " << e;
  std::vector<int32_t> offset(n_groups + 1, 0), active;
  for (int64_t g = 0; g < n_groups; ++g) {
    offset[g + 1] = offset[g] + count[g];
    if (count[g] > 0) active.push_back(static_cast<int32_t>(g));
  }
  for (int64_t g = 0; g <= n_groups; ++g) EXPECT_EQ(r.offsets[g], offset[g]) << "group " << g;
  ASSERT_EQ(r.active[kExperts + 1], static_cast<int32_t>(active.size()));
  for (size_t i = 0; i < active.size(); ++i) EXPECT_EQ(r.active[i], active[i]) << i;
  std::vector<int32_t> next(offset.begin(), offset.end() - 1);
  for (int64_t i = 0; i < n_tokens * slots; ++i) {
    const int32_t row = next[r.sel_expert[i]]++;
    EXPECT_EQ(r.row_of[i], row) << "entry " << i;
    EXPECT_EQ(r.row_token[row], i / slots) << "row " << row;
  }
}

// ids and weights [T, K] of cpu::moe_select on scores [T, E].
struct CpuRouting {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};
CpuRouting select_on_cpu(const MoeTestLayer& layer, std::vector<float> scores,
                         const std::vector<int64_t>& token_ids, bool hash, bool from_logits) {
  const int64_t n_tokens = static_cast<int64_t>(token_ids.size());
  CpuRouting c{std::vector<int32_t>(n_tokens * kUsed), std::vector<float>(n_tokens * kUsed)};
  std::vector<int64_t> hash_ids(n_tokens * kUsed);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t k = 0; k < kUsed; ++k) {
      hash_ids[t * kUsed + k] = layer.tid2eid.data_as<const int64_t>()[token_ids[t] * kUsed + k];
    }
  }
  const TensorView in =
      TensorView::contiguous(scores.data(), DType::kF32, Device::kCpu, {n_tokens, kExperts});
  const TensorView hashed =
      hash ? TensorView::contiguous(hash_ids.data(), DType::kI64, Device::kCpu, {n_tokens, kUsed})
           : TensorView{};
  const MoeRouting out{
      TensorView::contiguous(c.weights.data(), DType::kF32, Device::kCpu, {n_tokens, kUsed}),
      TensorView::contiguous(c.ids.data(), DType::kI32, Device::kCpu, {n_tokens, kUsed})};
  const TensorView bias = hash ? TensorView{} : layer.bias.view();
  if (from_logits) {
    cpu::moe_route(in, bias, hashed, kRouteScale, out);
  } else {
    cpu::moe_select(in, bias, hashed, kRouteScale, out);
  }
  return c;
}

// logits [T, E] = x · gateᵀ on the CPU: exact in f32 for these inputs.
std::vector<float> cpu_logits(const MoeTestLayer& layer, const std::vector<float>& x) {
  const int64_t n_tokens = static_cast<int64_t>(x.size()) / kDim;
  std::vector<float> logits(n_tokens * kExperts);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t e = 0; e < kExperts; ++e) {
      double sum = 0.0;
      for (int64_t d = 0; d < kDim; ++d) {
        sum +=
            static_cast<double>(x[t * kDim + d]) * layer.gate.data_as<const float>()[e * kDim + d];
      }
      logits[t * kExperts + e] = static_cast<float>(sum);
    }
  }
  return logits;
}

class MoeRouteCudaTest : public ::testing::TestWithParam<std::tuple<int, Routing>> {};

TEST_P(MoeRouteCudaTest, SelectsAsTheCpuAndPermutesByGroup) {
  const auto [n_tokens, routing] = GetParam();
  const bool hash = routing == Routing::kHash;
  const bool small = n_tokens <= cuda::moe::kSmallRouteTokens;
  dsv4::testing::SeededRng rng;
  MoeTestLayer layer;
  layer.dim = kDim, layer.n_experts = kExperts, layer.k_used = kUsed;
  moe_test::make_router(rng, routing, layer);
  const std::vector<float> x = moe_test::random_moe_input(rng, n_tokens, kDim);
  const std::vector<int64_t> token_ids = moe_test::random_token_ids(rng, n_tokens, layer.vocab);
  const Tensor x_dev = to_device(TensorView::contiguous(const_cast<float*>(x.data()), DType::kF32,
                                                        Device::kCpu, {n_tokens, kDim}));
  const Tensor ids_dev = to_device(TensorView::contiguous(const_cast<int64_t*>(token_ids.data()),
                                                          DType::kI64, Device::kCpu, {n_tokens}));
  const RouteResult r = run_route(layer, x_dev, ids_dev, hash);
  expect_permutation_of_ids(r, n_tokens);

  // The decision itself: the CPU's from exact logits (ties are off by far more than an ulp).
  const std::vector<float> logits = cpu_logits(layer, x);
  const CpuRouting from_logits = select_on_cpu(layer, logits, token_ids, hash, true);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t k = 0; k < kUsed; ++k) {
      const int64_t i = t * (kUsed + 1) + k, j = t * kUsed + k;
      EXPECT_EQ(r.sel_expert[i], from_logits.ids[j]) << "token " << t << " slot " << k;
      EXPECT_NEAR(r.sel_weight[i], from_logits.weights[j],
                  dsv4::testing::kCudaF32OpRelTol * std::fabs(from_logits.weights[j]));
    }
    EXPECT_EQ(r.sel_expert[t * (kUsed + 1) + kUsed], kExperts);
    EXPECT_EQ(r.sel_weight[t * (kUsed + 1) + kUsed], 1.0f);
  }
  if (!small) return;

  // The small router's scores, then its weights bit for bit from them. A hash layer's scores
  // must be the score kernel's for the same (token, expert): run that kernel on the same x.
  std::vector<float> scores = r.scores;
  if (hash) scores = run_route(layer, x_dev, ids_dev, /*hash=*/false).scores;
  for (int64_t i = 0; i < n_tokens * kExperts; ++i) {
    const float logit = logits[i];
    const float expected = std::sqrt(logit > 20.0f ? logit : std::log1p(std::exp(logit)));
    EXPECT_NEAR(scores[i], expected, dsv4::testing::kCudaF32OpRelTol * expected) << i;
  }
  const CpuRouting from_scores = select_on_cpu(layer, scores, token_ids, hash, false);
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t k = 0; k < kUsed; ++k) {
      const int64_t i = t * (kUsed + 1) + k, j = t * kUsed + k;
      const int64_t e = from_scores.ids[j];
      EXPECT_EQ(r.sel_expert[i], e);
      EXPECT_EQ(std::memcmp(&r.sel_weight[i], &from_scores.weights[j], 4), 0)
          << "token " << t << " slot " << k << ": " << r.sel_weight[i] << " against "
          << from_scores.weights[j];
      if (hash) {
        EXPECT_EQ(std::memcmp(&r.scores[t * kExperts + e], &scores[t * kExperts + e], 4), 0)
            << "token " << t << " expert " << e;
      }
    }
  }
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t d = 0; d < kDim; ++d) {
      const int64_t pair = (d & ~7) | ((d & 3) << 1) | ((d >> 2) & 1);  // pair_layout_index
      ASSERT_EQ(r.x_bf16[t * kDim + pair], float_to_bf16(x[t * kDim + d])) << t << ", " << d;
    }
  }
  for (int32_t done : r.mtile_done) ASSERT_EQ(done, 0);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MoeRouteCudaTest,
                         ::testing::Combine(::testing::Values(1, 2, 5, 8, 9, 64),
                                            ::testing::Values(Routing::kScore, Routing::kSkewed,
                                                              Routing::kOneSet, Routing::kHash)));

}  // namespace
}  // namespace dsv4::kernels

// MoE routing on CUDA (kernels/ops.h has the contracts; kernels/cpu/moe_route.cpp the
// reference). moe_route runs one thread per token: K passes of an argmax over the E biased
// scores, each taking the best expert not yet chosen (ties to the lower id), which is the CPU's
// partial sort. moe_group is one block whose thread e owns expert e: it counts its slots, the
// block scans the counts, and each thread lists its slots in slot order, so the grouping is
// stable and needs no atomics.
//
// Dimension letters: T tokens, E routed experts, K experts per token.
#include <cmath>

#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace dsv4::kernels::cuda {
namespace {

// torch.nn.functional.softplus with its default threshold, as on the CPU.
__device__ float sqrt_softplus(float x) { return sqrtf(x > 20.0f ? x : log1pf(expf(x))); }

struct RouteArgs {
  RowMatrix logits, weights;
  const float* bias;        // [E] or nullptr
  const int64_t* hash_ids;  // [T, K] or nullptr
  int32_t* ids;             // [T, K]
  float route_scale;
};

__global__ void moe_route_kernel(RouteArgs a) {
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (t >= a.logits.n_rows) return;
  const int64_t n_experts = a.logits.n_cols, k = a.weights.n_cols;
  const float* logit = a.logits.data + t * a.logits.row_stride;
  int32_t* chosen = a.ids + t * k;
  for (int64_t i = 0; i < k; ++i) {
    if (a.hash_ids != nullptr) {
      const int64_t e = a.hash_ids[t * k + i];
      if (e < 0 || e >= n_experts) __trap();  // tid2eid was validated at load: a bug
      chosen[i] = static_cast<int32_t>(e);
      continue;
    }
    int32_t best = -1;
    float best_score = 0.0f;
    for (int32_t e = 0; e < n_experts; ++e) {
      bool taken = false;
      for (int64_t j = 0; j < i; ++j) taken |= chosen[j] == e;
      if (taken) continue;
      const float biased = sqrt_softplus(logit[e]) + (a.bias ? a.bias[e] : 0.0f);
      if (best < 0 || biased > best_score) {
        best = e;
        best_score = biased;
      }
    }
    chosen[i] = best;
  }
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) sum += sqrt_softplus(logit[chosen[i]]);
  for (int64_t i = 0; i < k; ++i) {
    a.weights.data[t * a.weights.row_stride + i] =
        sqrt_softplus(logit[chosen[i]]) / (sum + 1e-20f) * a.route_scale;
  }
}

constexpr int kGroupThreads = 1024;

// One block; thread e handles experts e, e + blockDim.x, ... The scan of the counts is done by
// thread 0 over at most a few hundred experts.
__global__ void moe_group_kernel(const int32_t* expert, int64_t n_slots, int64_t n_experts,
                                 int32_t* order, int32_t* offsets) {
  for (int64_t s = threadIdx.x; s < n_slots; s += blockDim.x) {
    if (expert[s] < 0 || expert[s] >= n_experts) __trap();  // routing produced a bad id: a bug
  }
  for (int64_t e = threadIdx.x; e < n_experts; e += blockDim.x) {
    int32_t count = 0;
    for (int64_t s = 0; s < n_slots; ++s) count += expert[s] == e;
    offsets[e + 1] = count;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    offsets[0] = 0;
    for (int64_t e = 0; e < n_experts; ++e) offsets[e + 1] += offsets[e];
  }
  __syncthreads();
  for (int64_t e = threadIdx.x; e < n_experts; e += blockDim.x) {
    int32_t next = offsets[e];
    for (int64_t s = 0; s < n_slots; ++s) {
      if (expert[s] == e) order[next++] = static_cast<int32_t>(s);
    }
  }
}

}  // namespace

void moe_route(const TensorView& logits, const TensorView& bias, const TensorView& hash_ids,
               float route_scale, const MoeRouting& out) {
  RouteArgs a{as_rows(logits, "moe_route logits"), as_rows(out.weights, "moe_route weights"),
              nullptr, nullptr, nullptr, route_scale};
  const int64_t n_tokens = a.logits.n_rows, n_experts = a.logits.n_cols, k = a.weights.n_cols;
  DSV4_CHECK(a.weights.n_rows == n_tokens && k <= n_experts, "moe_route: weights must be [T, K]");
  DSV4_CHECK(out.ids.dtype == DType::kI32 && out.ids.is_contiguous() &&
                 out.ids.numel() == n_tokens * k,
             "moe_route: ids must be i32 [T, K]");
  const bool hashed = hash_ids.data != nullptr;
  DSV4_CHECK(!hashed || (hash_ids.dtype == DType::kI64 && hash_ids.is_contiguous() &&
                         hash_ids.numel() == n_tokens * k && bias.data == nullptr),
             "moe_route: hash_ids must be i64 [T, K], without a bias");
  DSV4_CHECK(!bias.data || (bias.dtype == DType::kF32 && bias.numel() == n_experts),
             "moe_route: bias [E]");
  a.bias = bias.data ? bias.data_as<const float>() : nullptr;
  a.hash_ids = hashed ? hash_ids.data_as<const int64_t>() : nullptr;
  a.ids = out.ids.data_as<int32_t>();
  if (n_tokens == 0) return;
  moe_route_kernel<<<element_blocks(n_tokens), kElementThreads, 0, op_stream()>>>(a);
  check_launch();
}

void moe_group(const TensorView& ids, const TensorView& order, const TensorView& offsets) {
  DSV4_CHECK(ids.dtype == DType::kI32 && ids.is_contiguous() && order.dtype == DType::kI32 &&
                 order.numel() == ids.numel() && offsets.dtype == DType::kI32 &&
                 offsets.rank() == 1 && offsets.is_contiguous() && order.is_contiguous(),
             "moe_group: ids i32 [T, K], order i32 [T·K], offsets i32 [E+1]");
  moe_group_kernel<<<1, kGroupThreads, 0, op_stream()>>>(
      ids.data_as<const int32_t>(), ids.numel(), offsets.size(0) - 1, order.data_as<int32_t>(),
      offsets.data_as<int32_t>());
  check_launch();
}

}  // namespace dsv4::kernels::cuda

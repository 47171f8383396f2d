// cuda::rope: interleaved (GPT-J) RoPE in place, one thread per (token, head, pair). The angle is
// the same single f32 product as on the CPU and the rotation the same rounded expression; only
// cosf/sinf may differ from the host's libm in the last ulp.
//
// Dimension letters: T tokens, H heads, Dh head dim, P rope pairs.
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/cuda_ops.h"

namespace dsv4::kernels::cuda {
namespace {

__global__ void rope_kernel(float* x, const int64_t* positions, const float* inv_freq,
                            int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t n_pairs,
                            float sign) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n_tokens * n_heads * n_pairs) return;
  const int64_t pair_idx = i % n_pairs, head = i / n_pairs;  // head runs over T·H
  const int64_t t = head / n_heads;
  const float angle = __fmul_rn(static_cast<float>(positions[t]), inv_freq[pair_idx]);
  const float c = cosf(angle);
  const float s = sign * sinf(angle);
  float* pair = x + head * head_dim + head_dim - 2 * n_pairs + 2 * pair_idx;
  const float a = pair[0], b = pair[1];
  pair[0] = __fadd_rn(__fmul_rn(a, c), __fmul_rn(-b, s));
  pair[1] = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
}

}  // namespace

void rope(const TensorView& x, const TensorView& positions, const TensorView& inv_freq,
          RopeDirection direction) {
  DSV4_CHECK(x.dtype == DType::kF32 && x.is_contiguous() && x.rank() >= 2,
             "rope: x f32 [T, .., Dh]");
  DSV4_CHECK(positions.dtype == DType::kI64 && positions.is_contiguous() &&
                 positions.numel() == x.size(0),
             "rope: positions i64 [T]");
  DSV4_CHECK(inv_freq.dtype == DType::kF32 && inv_freq.rank() == 1 && inv_freq.is_contiguous(),
             "rope: inv_freq f32 [P]");
  const int64_t n_tokens = x.size(0), head_dim = x.size(-1), n_pairs = inv_freq.size(0);
  DSV4_CHECK(2 * n_pairs <= head_dim, "rope: %lld pairs in a head of %lld", (long long)n_pairs,
             (long long)head_dim);
  if (x.numel() == 0 || n_pairs == 0) return;
  const int64_t n_heads = x.numel() / (n_tokens * head_dim);
  const float sign = direction == RopeDirection::kInverse ? -1.0f : 1.0f;
  rope_kernel<<<element_blocks(n_tokens * n_heads * n_pairs), kElementThreads, 0, op_stream()>>>(
      x.data_as<float>(), positions.data_as<const int64_t>(), inv_freq.data_as<const float>(),
      n_tokens, n_heads, head_dim, n_pairs, sign);
  check_launch();
}

}  // namespace dsv4::kernels::cuda

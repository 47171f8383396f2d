// cuda::rope: interleaved (GPT-J) RoPE in place, one thread per (token, head, pair). The angle is
// the same single f32 product as on the CPU and the rotation the same rounded expression; only
// cosf/sinf may differ from the host's libm in the last ulp. cuda::rms_norm_rope: one block per
// head row, rms_norm's kernel and then the same rotation on the normed values, in registers.
//
// Dimension letters: T tokens, H heads, Dh head dim, P rope pairs.
#include <cmath>

#include "kernels/contracts.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/ops/rope_row.cuh"

namespace dsv4::kernels::cuda {
namespace {

__global__ void rope_kernel(RopeOperands o, float sign) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= o.n_tokens * o.n_heads * o.n_pairs) return;
  const int64_t pair_idx = i % o.n_pairs, head = i / o.n_pairs;  // head runs over T·H
  float* pair = o.x + head * o.head_dim + o.head_dim - 2 * o.n_pairs + 2 * pair_idx;
  rotate(pair, pair[0], pair[1], o.positions[head / o.n_heads], o.inv_freq[pair_idx], sign);
}

__global__ void rms_norm_rope_kernel(RopeOperands o, const float* weight, float eps) {
  norm_rope_row(o.x + blockIdx.x * o.head_dim, o.head_dim, o.n_pairs, weight, eps,
                o.positions[blockIdx.x / o.n_heads], o.inv_freq);
}

}  // namespace

void rope(const TensorView& x, const TensorView& positions, const TensorView& inv_freq,
          RopeDirection direction) {
  const RopeOperands o = rope_operands(x, positions, inv_freq);
  if (x.numel() == 0 || o.n_pairs == 0) return;
  const float sign = direction == RopeDirection::kInverse ? -1.0f : 1.0f;
  rope_kernel<<<element_blocks(o.n_tokens * o.n_heads * o.n_pairs), kElementThreads, 0,
                op_stream()>>>(o, sign);
  check_launch();
}

void rms_norm_rope(const TensorView& x, const TensorView& weight, float eps,
                   const TensorView& positions, const TensorView& inv_freq) {
  const RopeOperands o = rope_operands(x, positions, inv_freq);
  const float* w =
      weight.data == nullptr ? nullptr : f32_vector(weight, o.head_dim, "rms_norm_rope weight");
  if (x.numel() == 0) return;
  rms_norm_rope_kernel<<<static_cast<unsigned>(o.n_tokens * o.n_heads), kRowThreads, 0,
                         op_stream()>>>(o, w, eps);
  check_launch();
}

}  // namespace dsv4::kernels::cuda

// Interleaved (GPT-J) RoPE on the trailing rope dims of each head (and rms_norm_rope, a per-head
// norm before it), as transformers'
// apply_rotary_pos_emb for DeepSeek-V4 computes it: the angle pos·θ_i is one f32 product (its
// `inv_freq @ position_ids`), cos/sin are taken of that f32 angle, and the rotation is
// x·cos + rotate_half(x)·sin in f32, rotate_half mapping the pair (a, b) to (−b, a).
//
// Dimension letters: T tokens, H heads, Dh head dim, P rope pairs.
#include <cmath>

#include "kernels/contracts.h"
#include "kernels/cpu/cpu_ops.h"

namespace dsv4::kernels::cpu {

void rope(const TensorView& x, const TensorView& positions, const TensorView& inv_freq,
          RopeDirection direction) {
  const auto [data, pos, theta, n_tokens, n_heads, head_dim, n_pairs] =
      rope_operands(x, positions, inv_freq);
  const float sign = direction == RopeDirection::kInverse ? -1.0f : 1.0f;
#pragma omp parallel for if (n_tokens * n_heads * n_pairs > kParallelWork)
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t i = 0; i < n_pairs; ++i) {
      const float angle = static_cast<float>(pos[t]) * theta[i];
      const float c = std::cos(angle);
      const float s = sign * std::sin(angle);
      for (int64_t h = 0; h < n_heads; ++h) {
        float* pair = data + (t * n_heads + h) * head_dim + head_dim - 2 * n_pairs + 2 * i;
        const float a = pair[0];
        const float b = pair[1];
        pair[0] = a * c + (-b) * s;
        pair[1] = b * c + a * s;
      }
    }
  }
}

// The composition itself: the reference the fused CUDA kernel matches bit for bit.
void rms_norm_rope(const TensorView& x, const TensorView& weight, float eps,
                   const TensorView& positions, const TensorView& inv_freq) {
  const TensorView heads = x.reshaped({x.numel() / x.size(-1), x.size(-1)});
  cpu::rms_norm(heads, weight, eps, heads);
  cpu::rope(x, positions, inv_freq, RopeDirection::kForward);
}

}  // namespace dsv4::kernels::cpu

// Interleaved (GPT-J) RoPE on the trailing rope dims of each head, as transformers'
// apply_rotary_pos_emb for DeepSeek-V4 computes it: the angle pos·θ_i is one f32 product (its
// `inv_freq @ position_ids`), cos/sin are taken of that f32 angle, and the rotation is
// x·cos + rotate_half(x)·sin in f32, rotate_half mapping the pair (a, b) to (−b, a).
//
// Dimension letters: T tokens, H heads, Dh head dim, P rope pairs.
#include <cmath>

#include "kernels/cpu/cpu_ops.h"

namespace dsv4::kernels::cpu {

void rope(const TensorView& x, const TensorView& positions, const TensorView& inv_freq,
          RopeDirection direction) {
  DSV4_CHECK(x.dtype == DType::kF32 && x.is_contiguous() && x.rank() >= 2,
             "rope: x f32 [T, .., Dh]");
  DSV4_CHECK(positions.dtype == DType::kI64 && positions.numel() == x.size(0),
             "rope: positions i64 [T]");
  DSV4_CHECK(inv_freq.dtype == DType::kF32 && inv_freq.rank() == 1, "rope: inv_freq f32 [P]");
  const int64_t n_tokens = x.size(0);
  const int64_t head_dim = x.size(-1);
  const int64_t n_heads = x.numel() / (n_tokens * head_dim);  // [T, H, Dh] or [T, Dh]
  const int64_t n_pairs = inv_freq.size(0);
  DSV4_CHECK(2 * n_pairs <= head_dim, "rope: %lld pairs in a head of %lld", (long long)n_pairs,
             (long long)head_dim);
  const float sign = direction == RopeDirection::kInverse ? -1.0f : 1.0f;
  const int64_t* pos = positions.data_as<const int64_t>();
  const float* theta = inv_freq.data_as<const float>();
  float* data = x.data_as<float>();
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

}  // namespace dsv4::kernels::cpu

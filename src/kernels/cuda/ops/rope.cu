// cuda::rope: interleaved (GPT-J) RoPE in place, one thread per (token, head, pair). The angle is
// the same single f32 product as on the CPU and the rotation the same rounded expression; only
// cosf/sinf may differ from the host's libm in the last ulp. cuda::rms_norm_rope: one block per
// head row, rms_norm's kernel and then the same rotation on the normed values, in registers; a
// call of a prompt's many rows a warp a row, with the same bits (rope_row.cuh).
// cuda::rope_fp8 (the attention output before wo_a): a warp a 128-column group of the flat
// [T, H·Dh] row, quantize_activation_fp8's layout (device/fp8_quantize.cuh); lane l holds
// columns k0 + l + 32 i, so a pair's two dims are lanes l and l ^ 1 of one register, swapped by
// a shuffle, and turned with rope's expression before the group is stored and quantized.
//
// Dimension letters: T tokens, H heads, Dh head dim, P rope pairs.
#include <cmath>

#include "kernels/contracts.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/device/fp8_quantize.cuh"
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

constexpr int kRopeFp8Warps = 8;  // a block: 8 groups of 128 columns, a warp each

// Warp w of block b: group (token, j) = divmod(8 b + w, Kb) of the [T, H·Dh] rows. A column of
// a head's last 2P dims is turned with its pair partner (the even dim first, as turn_pair
// writes them), written back, and every column quantized.
__global__ void __launch_bounds__(kRopeFp8Warps * 32)
    rope_fp8_kernel(RopeOperands o, float sign, Fp8Out q, int64_t n_groups) {
  const int64_t group = int64_t{blockIdx.x} * kRopeFp8Warps + threadIdx.x / 32;
  if (group >= o.n_tokens * n_groups) return;  // whole warps: the shuffles below see 32 lanes
  const int64_t t = group / n_groups, j = group % n_groups, k0 = j * kFp8Group;
  const int64_t n_cols = o.n_heads * o.head_dim, first_pair = o.head_dim - 2 * o.n_pairs;
  const int lane = threadIdx.x % 32;
  float* row = o.x + t * n_cols;
  float v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t k = k0 + lane + 32 * i;
    v[i] = k < n_cols ? row[k] : 0.0f;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float partner = __shfl_xor_sync(0xffffffffu, v[i], 1);
    const int64_t k = k0 + lane + 32 * i, d = k % o.head_dim;
    if (k >= n_cols || d < first_pair) continue;
    const bool even = (d - first_pair) % 2 == 0;
    float pair[2];
    const float a = even ? v[i] : partner, b = even ? partner : v[i];
    rotate(pair, a, b, o.positions[t], o.inv_freq[(d - first_pair) / 2], sign);
    v[i] = even ? pair[0] : pair[1];
    row[k] = v[i];
  }
  fp8_store_warp_group(v, k0, n_cols, q.row_codes(t), q.row_scales(t) + j);
}

__global__ void rms_norm_rope_kernel(RopeOperands o, const float* weight, float eps) {
  norm_rope_row(o.x + blockIdx.x * o.head_dim, o.head_dim, o.n_pairs, weight, eps,
                o.positions[blockIdx.x / o.n_heads], o.inv_freq);
}

// A row a warp (warp_norm_rope_row): a block's barriers and its one row in flight are what a
// block a row waits on when a prompt's heads make hundreds of thousands of rows.
constexpr int kWarpRowWarps = 4;
// Rows from which a call takes a warp a row: a prompt piece's heads (256 tokens × 64), not a
// decode step's (up to 32 × 64 rows, whose graphs keep a block a row). The bits are the same.
constexpr int64_t kWarpRowsFrom = 4096;

template <int kLanes>
__global__ void __launch_bounds__(kWarpRowWarps * 32)
    rms_norm_rope_warp_kernel(RopeOperands o, const float* weight, float eps) {
  const int64_t r = int64_t{blockIdx.x} * kWarpRowWarps + threadIdx.x / 32;
  if (r >= o.n_tokens * o.n_heads) return;  // whole warps: the reduction's shuffles see 32 lanes
  warp_norm_rope_row<kLanes>(o.x + r * o.head_dim, o.head_dim, o.n_pairs, weight, eps,
                             o.positions[r / o.n_heads], o.inv_freq);
}

// Whether a call's rows take warp_norm_rope_row's vectors of kLanes lanes a thread: every row
// starting on a whole vector.
template <int kLanes>
bool takes_warp_rows(const RopeOperands& o) {
  constexpr int kVec = kWarpRowVec<kLanes>;
  return o.head_dim % kVec == 0 && reinterpret_cast<uintptr_t>(o.x) % (sizeof(float) * kVec) == 0;
}

template <int kLanes>
bool launch_warp_rows(const RopeOperands& o, const float* weight, float eps) {
  if (!takes_warp_rows<kLanes>(o)) return false;
  const int64_t rows = o.n_tokens * o.n_heads;
  rms_norm_rope_warp_kernel<kLanes>
      <<<static_cast<unsigned>(ceil_div(rows, int64_t{kWarpRowWarps})), kWarpRowWarps * 32, 0,
         op_stream()>>>(o, weight, eps);
  check_launch();
  return true;
}

// A prompt's many head rows a warp a row (launch_warp_rows), where they take it: whether it ran.
bool warp_rows(const RopeOperands& o, const float* weight, float eps) {
  const int64_t first_pair = o.head_dim - 2 * o.n_pairs;
  if (o.n_tokens * o.n_heads < kWarpRowsFrom || first_pair % 2 != 0 || o.head_dim > 512) {
    return false;
  }
  // Lanes a thread: the power of two ≥ Dh / 32, at least a pair, at most 16.
  if (o.head_dim <= 64) return launch_warp_rows<2>(o, weight, eps);
  if (o.head_dim <= 128) return launch_warp_rows<4>(o, weight, eps);
  if (o.head_dim <= 256) return launch_warp_rows<8>(o, weight, eps);
  return launch_warp_rows<16>(o, weight, eps);
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

void rope_fp8(const TensorView& x, const TensorView& positions, const TensorView& inv_freq,
              RopeDirection direction, const Fp8Activation& x_fp8) {
  const RopeOperands o = rope_operands(x, positions, inv_freq);
  if (o.n_tokens == 0) return;
  const int64_t n_cols = o.n_heads * o.head_dim;
  DSV4_CHECK(o.head_dim % 2 == 0 && (o.head_dim - 2 * o.n_pairs) % 2 == 0,
             "rope_fp8: a head of %lld with %lld pairs: a pair's dims must be lanes l, l ^ 1",
             (long long)o.head_dim, (long long)o.n_pairs);
  const Fp8Out q = fp8_out(x.reshaped({o.n_tokens, n_cols}), x_fp8);
  const int64_t n_groups = fp8_groups(n_cols), n_units = o.n_tokens * n_groups;
  if (n_units == 0) return;
  const float sign = direction == RopeDirection::kInverse ? -1.0f : 1.0f;
  rope_fp8_kernel<<<static_cast<unsigned>(ceil_div(n_units, kRopeFp8Warps)), kRopeFp8Warps * 32, 0,
                    op_stream()>>>(o, sign, q, n_groups);
  check_launch();
}

void rms_norm_rope(const TensorView& x, const TensorView& weight, float eps,
                   const TensorView& positions, const TensorView& inv_freq) {
  const RopeOperands o = rope_operands(x, positions, inv_freq);
  const float* w =
      weight.data == nullptr ? nullptr : f32_vector(weight, o.head_dim, "rms_norm_rope weight");
  if (x.numel() == 0) return;
  if (warp_rows(o, w, eps)) return;
  rms_norm_rope_kernel<<<static_cast<unsigned>(o.n_tokens * o.n_heads), kRowThreads, 0,
                         op_stream()>>>(o, w, eps);
  check_launch();
}

}  // namespace dsv4::kernels::cuda

// cuda::indexer_scores_fp8, the fast profile's indexer scores (DeepSeek-V3.2's act_quant and
// fp8_index): a block per (query t, 64 entries). It quantizes the entries' keys to E4M3 (a warp a
// row: amax, the power-of-two scale, cvt.rn.satfinite, bit for bit the CPU reference's values),
// then for each 64 heads of the query their rows the same way, multiplies heads × entries on the
// FP8 tensor cores (mma.sync m16n8k32, f32 accumulators; a warp 16 heads), and reduces
// ReLU(dot) · head weight over the heads: within a warp by shuffles, across the four warps in
// warp order, times the entry's scale.
//
// Dimension letters: T tokens, HI indexer heads, DI indexer head dim (≤ 128, padded to 128 with
// zeros), N compressed entries.
#include <cuda_fp8.h>

#include "kernels/contracts.h"
#include "kernels/fp8_scale.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/device/fp8_mma.cuh"
#include "kernels/cuda/device/mma_sync.cuh"

namespace dsv4::kernels::cuda {
namespace {

constexpr int kEntries = 64;        // entries a block (the N of the products)
constexpr int kHeads = 64;          // heads a pass (the M: 16 a warp)
constexpr int kDims = 128;          // DI padded
constexpr int kPitch = kDims + 16;  // bytes a quantized row: rows g = 0 … 7 start in distinct banks
constexpr int kWarps = 4;

struct Smem {
  uint8_t keys[kEntries][kPitch];
  uint8_t queries[kHeads][kPitch];
  float key_scale[kEntries];
  float head_weight[kHeads];
  float partial[kWarps][kEntries];
};

struct ScoreArgs {
  const float* q;        // [T, HI, DI]
  const float* keys;     // [N, DI]
  const float* weights;  // [T, HI]
  IndexerDims dims;
  float q_scale, weight_scale;
  float* scores;  // [T, N]

  ScoreArgs(const IndexerScoreParams& p, const IndexerDims& d)
      : q(p.q.data_as<const float>()),
        keys(p.keys.data_as<const float>()),
        weights(p.weights.data_as<const float>()),
        dims(d),
        q_scale(p.q_scale),
        weight_scale(p.weight_scale),
        scores(p.scores.data_as<float>()) {}
};

// A row of DI floats (nullptr: a zero row) into E4M3 bytes at dst by one warp, lanes over
// 4-value groups (zeros up to 128); returns its scale (in every lane).
__device__ float quantize_row(const float* row, int head_dim, uint8_t* dst) {
  const int lane = threadIdx.x % 32, d = 4 * lane;
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (row != nullptr && d < head_dim) v = *reinterpret_cast<const float4*>(row + d);
  const float amax =
      warp_reduce(fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))), MaxOp{});
  const float scale = fp8_activation_scale(amax);
  const uint32_t lo =
      __nv_cvt_float2_to_fp8x2(make_float2(v.x / scale, v.y / scale), __NV_SATFINITE, __NV_E4M3);
  const uint32_t hi =
      __nv_cvt_float2_to_fp8x2(make_float2(v.z / scale, v.w / scale), __NV_SATFINITE, __NV_E4M3);
  *reinterpret_cast<uint32_t*>(dst + d) = lo | hi << 16;
  return scale;
}

__global__ void __launch_bounds__(32 * kWarps) indexer_fp8_kernel(ScoreArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem& s = *reinterpret_cast<Smem*>(smem_raw);
  const int64_t t = blockIdx.x, n0 = int64_t{blockIdx.y} * kEntries;
  const int n_heads = static_cast<int>(a.dims.n_heads),
            head_dim = static_cast<int>(a.dims.head_dim);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, c = lane % 4;
  const float* keys = row_keys(a.dims, a.keys, t);
  const int64_t n_keys = row_n_keys(a.dims, t);
  if (n0 >= n_keys) return;
  for (int r = warp; r < kEntries; r += kWarps) {
    const int64_t n = n0 + r;
    const float scale =
        quantize_row(n < n_keys ? keys + n * head_dim : nullptr, head_dim, s.keys[r]);
    if (lane == 0) s.key_scale[r] = scale;
  }
  const int k_steps = (head_dim + 31) / 32;
  float key_sum[kEntries / 8][2] = {};  // this thread's columns 8n + 2c, + 1: Σ over heads
  for (int h0 = 0; h0 < n_heads; h0 += kHeads) {
    __syncthreads();  // the previous pass's products read the queries
    for (int r = warp; r < kHeads; r += kWarps) {
      const int h = h0 + r;
      const float* row = h < n_heads ? a.q + (t * n_heads + h) * head_dim : nullptr;
      const float scale = quantize_row(row, head_dim, s.queries[r]);
      if (lane == 0) {
        s.head_weight[r] = h < n_heads
                               ? (a.weights[t * n_heads + h] * a.weight_scale) * (a.q_scale * scale)
                               : 0.0f;
      }
    }
    __syncthreads();
    float dot[kEntries / 8][4] = {};
    const uint8_t* q_lo = s.queries[16 * warp + g];
    const uint8_t* q_hi = s.queries[16 * warp + g + 8];
    for (int k = 0; k < k_steps; ++k) {
      const int d = 32 * k + 4 * c;
      const uint32_t qa[4] = {*reinterpret_cast<const uint32_t*>(q_lo + d),
                              *reinterpret_cast<const uint32_t*>(q_hi + d),
                              *reinterpret_cast<const uint32_t*>(q_lo + d + 16),
                              *reinterpret_cast<const uint32_t*>(q_hi + d + 16)};
#pragma unroll
      for (int n = 0; n < kEntries / 8; ++n) {
        const uint8_t* key = s.keys[8 * n + g];
        mma_e4m3_16832(dot[n], qa, *reinterpret_cast<const uint32_t*>(key + d),
                       *reinterpret_cast<const uint32_t*>(key + d + 16), dot[n]);
      }
    }
    const float w_lo = s.head_weight[16 * warp + g], w_hi = s.head_weight[16 * warp + g + 8];
#pragma unroll
    for (int n = 0; n < kEntries / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float v = fmaxf(dot[n][e], 0.0f) * w_lo + fmaxf(dot[n][e + 2], 0.0f) * w_hi;
        v += __shfl_xor_sync(0xffffffffu, v, 4);
        v += __shfl_xor_sync(0xffffffffu, v, 8);
        v += __shfl_xor_sync(0xffffffffu, v, 16);
        key_sum[n][e] += v;
      }
    }
  }
  if (g == 0) {
#pragma unroll
    for (int n = 0; n < kEntries / 8; ++n) {
      s.partial[warp][8 * n + 2 * c] = key_sum[n][0];
      s.partial[warp][8 * n + 2 * c + 1] = key_sum[n][1];
    }
  }
  __syncthreads();
  if (threadIdx.x < kEntries && n0 + threadIdx.x < n_keys) {
    float total = 0.0f;
    for (int w = 0; w < kWarps; ++w) total += s.partial[w][threadIdx.x];
    a.scores[t * a.dims.n_entries + n0 + threadIdx.x] = total * s.key_scale[threadIdx.x];
  }
}

}  // namespace

void indexer_scores_fp8(const IndexerScoreParams& p) {
  const IndexerDims dims = indexer_fp8_dims(p);
  if (dims.n_tokens * dims.n_entries == 0) return;
  const ScoreArgs a(p, dims);
  const dim3 grid(static_cast<unsigned>(dims.n_tokens),
                  static_cast<unsigned>(ceil_div(dims.n_entries, int64_t{kEntries})));
  indexer_fp8_kernel<<<grid, 32 * kWarps, sizeof(Smem), op_stream()>>>(a);
  check_launch();
}

}  // namespace dsv4::kernels::cuda

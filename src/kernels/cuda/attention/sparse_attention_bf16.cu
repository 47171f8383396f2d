// cuda::sparse_attention_bf16, the fast profile's sparse attention on bf16 tensor cores (the
// design of FlashMLA's sparse kernels, written for mma.sync): every head of a query shares the
// query's candidate rows, so a block takes one query and 64 of its heads (the M of the GEMMs)
// and walks the candidates in tiles of 32 (the N of q·kᵀ, the K of p·v), with an online softmax
// in f32. K = V: one staged tile serves both products.
//
// A tile's rows arrive as f32 (the caches are f32, shared with the exact profile) by cp.async
// into a staging buffer while the previous tile computes, then one pass rounds them to bf16 into
// the operand tile (rows padded by 16 bytes: ldmatrix's eight row addresses hit distinct banks).
// Eight warps: warp w takes heads 16·(w % 4) … + 15 and head dims 256·(w / 4) … + 255 of the
// output (128 f32 accumulators a thread); for the logits each warp of a pair multiplies its half
// of the dims and the pair adds the two halves through shared memory (a + b in both warps: the
// same bits), so each logit is computed once.
//
// Prefill (enough queries to fill the GPU): one block per (query, 64 heads), the whole candidate
// list. Decode: a query's candidates are split into runs of whole tiles over more blocks (split-K
// style), each writing its unnormalised output with its running max and sum, and a combine
// kernel adds the runs and the sink, so a single query still spreads over the SMs.
//
// Dimension letters: T tokens, H heads, Dh head dim (≤ 512, padded to 512), K candidates.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/attention/candidates.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/device/mma_sync.cuh"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/stream.h"

namespace dsv4::kernels::cuda {
namespace {

constexpr int kDims = 512;  // head dims a block computes (smaller ones zero-padded)
constexpr int kHeads = 64;  // heads a block: the M of both products
constexpr int kTile = 32;   // candidates a tile
constexpr int kWarps = 8;   // 4 head rows of 16 × 2 dim halves
constexpr int kThreads = 32 * kWarps;
constexpr int kHalfDims = kDims / 2;  // a warp's output dims
constexpr int kRowPitch = kDims + 8;  // bf16 a staged row: 1040 bytes, 16 past a bank cycle
constexpr float kLog2e = 1.4426950408889634f;
// Tiles a run of a decode row over its own cache: V4-Flash's 640 candidates in 20 runs, so that
// one row takes 20 SMs.
constexpr int kRowRunTiles = 1;

struct Smem {
  __nv_bfloat16 q[kHeads][kRowPitch];
  __nv_bfloat16 kv[kTile][kRowPitch];
  float staging[kTile][kDims];      // the next tile as it arrives, f32
  float logits[kWarps][16][kTile];  // each warp's half of the logits
  int32_t rows[2][kTile];           // the staged tiles' kv rows (−1: none)
};

// Where a block's output goes: with one run a query, the normalised rows; with several, each
// run's unnormalised rows and its (max, sum) in log2 units for the combine.
struct Runs {
  bool split = false;  // whether the combine normalises (else each block, of the only run)
  int n_runs = 1;
  int tiles_per_run = 0;
  int64_t n_rows = 0;         // T · H
  float* partial = nullptr;   // [runs][T][H][512]
  float2* max_sum = nullptr;  // [runs][T][H]
};

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Candidates [c0, c0 + kTile) of query t into the staging buffer (cp.async; zeros past the head
// dim and for a missing candidate, whose row is listed −1): a row per 8 threads, 16 bytes each a
// step, and the rows list of the tile.
__device__ void stage_tile(const AttentionArgs& a, int64_t t, int64_t c0, int64_t c_end,
                           int64_t n_extra_visible, Smem& s, int buffer) {
  const int r = threadIdx.x / 8, part = threadIdx.x % 8;
  const int64_t j = c0 + r;
  const int32_t row = j < c_end ? candidate_row(a, t, j, n_extra_visible) : -1;
  const float* kv = j < a.window.n_candidates ? source_rows(a.window, t) : source_rows(a.extra, t);
  const float* src = row >= 0 ? kv + int64_t{row} * a.head_dim : a.q;  // a.q: mapped, not read
  for (int d = 4 * part; d < kDims; d += 32) {
    cp_async16(&s.staging[r][d], src + (d < a.head_dim ? d : 0), row >= 0 && d < a.head_dim);
  }
  if (part == 0) s.rows[buffer][r] = row;
}

// The staged f32 tile rounded to bf16 into the operand tile.
__device__ void round_tile(Smem& s) {
  for (int i = threadIdx.x; i < kTile * kDims / 4; i += kThreads) {
    const int r = i / (kDims / 4), d = 4 * (i % (kDims / 4));
    const float4 v = *reinterpret_cast<const float4*>(&s.staging[r][d]);
    *reinterpret_cast<uint2*>(&s.kv[r][d]) = make_uint2(pack_bf16(v.x, v.y), pack_bf16(v.z, v.w));
  }
}

// Barrier of the two warps that share head rows (ids 1 … 4; 0 is __syncthreads').
__device__ __forceinline__ void pair_barrier(int head_row) {
  asm volatile("bar.sync %0, 64;\n" ::"r"(head_row + 1) : "memory");
}

__global__ void __launch_bounds__(kThreads, 1)
    sparse_attention_bf16_kernel(AttentionArgs a, int64_t head_blocks, Runs runs) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem& s = *reinterpret_cast<Smem*>(smem_raw);
  const int run = static_cast<int>(blockIdx.x % runs.n_runs);
  const int64_t query_block = blockIdx.x / runs.n_runs;
  const int64_t t = query_block / head_blocks, h0 = query_block % head_blocks * kHeads;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int head_row = warp % 4, half = warp / 4;
  const int64_t n_extra_visible = visible_extra(a, t);
  const int64_t n_candidates = a.window.n_candidates + a.extra.n_candidates;
  const int64_t c_begin = int64_t{run} * runs.tiles_per_run * kTile;
  const int64_t c_end = std::min(n_candidates, c_begin + int64_t{runs.tiles_per_run} * kTile);
  const int n_tiles = static_cast<int>((c_end - c_begin + kTile - 1) / kTile);

  if (n_tiles > 0) stage_tile(a, t, c_begin, c_end, n_extra_visible, s, 0);
  cp_async_commit();
  // The 64 heads' queries, rounded to bf16 (zeros past the heads and the head dim).
  for (int i = threadIdx.x; i < kHeads * kDims / 4; i += kThreads) {
    const int h = i / (kDims / 4), d = 4 * (i % (kDims / 4));
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (h0 + h < a.n_heads && d < a.head_dim) {
      v = *reinterpret_cast<const float4*>(a.q + ((t * a.n_heads + h0 + h) * a.head_dim + d));
    }
    *reinterpret_cast<uint2*>(&s.q[h][d]) = make_uint2(pack_bf16(v.x, v.y), pack_bf16(v.z, v.w));
  }

  // Thread (g = lane / 4, c = lane % 4) holds accumulator rows g and g + 8 of its warp's 16.
  const int g = lane / 4, c = lane % 4;
  const float scale = a.scale * kLog2e;  // logits in log2 units: exp2 below
  float running_max[2], running_sum[2] = {0.0f, 0.0f};
  for (int i = 0; i < 2; ++i) {
    const int64_t h = h0 + 16 * head_row + g + 8 * i;
    running_max[i] = h < a.n_heads ? a.sinks[h] * kLog2e : 0.0f;  // the sink joins the max
  }
  float out[kHalfDims / 8][4] = {};

  for (int tile = 0; tile < n_tiles; ++tile) {
    cp_async_wait<0>();
    __syncthreads();  // the tile staged; every warp done with the previous operand tile
    round_tile(s);
    __syncthreads();  // the operand tile written; the staging buffer free
    if (tile + 1 < n_tiles) {
      stage_tile(a, t, c_begin + (tile + 1) * kTile, c_end, n_extra_visible, s, (tile + 1) % 2);
    }
    cp_async_commit();
    const int32_t* rows = s.rows[tile % 2];

    // This warp's half of the logits: 16 heads × 32 candidates over its 256 dims.
    float logit[kTile / 8][4] = {};
    for (int k0 = half * kHalfDims; k0 < (half + 1) * kHalfDims; k0 += 16) {
      uint32_t qa[4];
      ldmatrix_x4(qa, &s.q[16 * head_row + lane % 8 + 8 * (lane / 8 % 2)][k0 + 8 * (lane / 16)]);
#pragma unroll
      for (int n = 0; n < kTile / 8; n += 2) {
        uint32_t kb[4];
        ldmatrix_x4(kb, &s.kv[8 * n + lane % 8 + 8 * (lane / 16)][k0 + 8 * (lane / 8 % 2)]);
        mma_bf16_16816(logit[n], qa, kb[0], kb[1]);
        mma_bf16_16816(logit[n + 1], qa, kb[2], kb[3]);
      }
    }
    float(*mine)[kTile] = s.logits[warp];
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n) {
      *reinterpret_cast<float2*>(&mine[g][8 * n + 2 * c]) = make_float2(logit[n][0], logit[n][1]);
      *reinterpret_cast<float2*>(&mine[g + 8][8 * n + 2 * c]) =
          make_float2(logit[n][2], logit[n][3]);
    }
    pair_barrier(head_row);
    const float(*other)[kTile] = s.logits[warp ^ 4];
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = g + 8 * (e / 2), col = 8 * n + 2 * c + e % 2;
        const float sum = logit[n][e] + other[r][col];  // the same bits in both warps
        logit[n][e] = rows[col] >= 0 ? sum * scale : -INFINITY;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], logit[n][e]);
      }
    }
    // Online softmax: rescale what was summed to the new max.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 1));
      tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 2));
      const float new_max = fmaxf(running_max[i], tile_max[i]);
      const float rescale = exp2f(running_max[i] - new_max);
      running_max[i] = new_max;
      running_sum[i] *= rescale;
#pragma unroll
      for (int n = 0; n < kHalfDims / 8; ++n) {
        out[n][2 * i] *= rescale;
        out[n][2 * i + 1] *= rescale;
      }
    }
#pragma unroll
    for (int n = 0; n < kTile / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        logit[n][e] = exp2f(logit[n][e] - running_max[e / 2]);  // 0 for a missing candidate
        running_sum[e / 2] += logit[n][e];
      }
    }
    // out += p · rows: p as bf16 A fragments straight from the accumulators (a k-step of 16
    // candidates is two of their n-tiles), the rows as B through ldmatrix.trans.
#pragma unroll
    for (int k = 0; k < kTile / 16; ++k) {
      const uint32_t pa[4] = {pack_bf16(logit[2 * k][0], logit[2 * k][1]),
                              pack_bf16(logit[2 * k][2], logit[2 * k][3]),
                              pack_bf16(logit[2 * k + 1][0], logit[2 * k + 1][1]),
                              pack_bf16(logit[2 * k + 1][2], logit[2 * k + 1][3])};
      const __nv_bfloat16* v_rows = &s.kv[16 * k + lane % 8 + 8 * (lane / 8 % 2)][0];
#pragma unroll
      for (int n = 0; n < kHalfDims / 8; n += 2) {
        uint32_t vb[4];
        ldmatrix_x4_trans(vb, v_rows + half * kHalfDims + 8 * n + 8 * (lane / 16));
        mma_bf16_16816(out[n], pa, vb[0], vb[1]);
        mma_bf16_16816(out[n + 1], pa, vb[2], vb[3]);
      }
    }
  }

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    running_sum[i] += __shfl_xor_sync(0xffffffffu, running_sum[i], 1);
    running_sum[i] += __shfl_xor_sync(0xffffffffu, running_sum[i], 2);
    const int64_t h = h0 + 16 * head_row + g + 8 * i;
    if (h >= a.n_heads) continue;
    const int64_t row = t * a.n_heads + h;
    float* dst;
    float denom = 1.0f;
    if (!runs.split) {
      // As the combine computes one run (w = 1, the sink's term first, then a division): a
      // decode row alone gets the bits it gets in a batch, where it always splits.
      dst = a.out + row * a.head_dim;
      denom = exp2f(a.sinks[h] * kLog2e - running_max[i]) + running_sum[i];
    } else {
      dst = runs.partial + (int64_t{run} * runs.n_rows + row) * kDims;
      if (half == 0 && c == 0) {
        runs.max_sum[int64_t{run} * runs.n_rows + row] =
            make_float2(running_max[i], running_sum[i]);
      }
    }
#pragma unroll
    for (int n = 0; n < kHalfDims / 8; ++n) {
      const int d = half * kHalfDims + 8 * n + 2 * c;
      if (d < a.head_dim) {
        *reinterpret_cast<float2*>(dst + d) =
            make_float2(out[n][2 * i] / denom, out[n][2 * i + 1] / denom);
      }
    }
  }
}

// out[t, h] = Σ_r 2^(m_r − M) · partial_r / (Σ_r 2^(m_r − M) · l_r + 2^(sink − M)), M the
// largest of the runs' maxima (each began at the sink): a block per (t, h), a thread per 2 dims.
__global__ void combine_runs_kernel(AttentionArgs a, Runs runs) {
  const int64_t n_rows = runs.n_rows, row = blockIdx.x, h = row % a.n_heads;
  const float sink = a.sinks[h] * kLog2e;
  float max_all = sink;
  for (int r = 0; r < runs.n_runs; ++r) max_all = fmaxf(max_all, runs.max_sum[r * n_rows + row].x);
  float denom = exp2f(sink - max_all);
  for (int r = 0; r < runs.n_runs; ++r) {
    const float2 ms = runs.max_sum[r * n_rows + row];
    denom += exp2f(ms.x - max_all) * ms.y;
  }
  for (int64_t d = 2 * threadIdx.x; d < a.head_dim; d += 2 * blockDim.x) {
    float2 sum = make_float2(0.0f, 0.0f);
    for (int r = 0; r < runs.n_runs; ++r) {
      const float w = exp2f(runs.max_sum[r * n_rows + row].x - max_all);
      const float2 p =
          *reinterpret_cast<const float2*>(runs.partial + (r * n_rows + row) * kDims + d);
      sum.x += w * p.x;
      sum.y += w * p.y;
    }
    *reinterpret_cast<float2*>(a.out + row * a.head_dim + d) =
        make_float2(sum.x / denom, sum.y / denom);
  }
}

}  // namespace

void sparse_attention_bf16(const SparseAttentionParams& p) {
  const AttentionArgs a = attention_args(p);
  check_fast_attention_head_dim(a.head_dim);
  const int64_t n_tokens = p.q.size(0);
  if (n_tokens * a.n_heads == 0) return;
  const int64_t head_blocks = (a.n_heads + kHeads - 1) / kHeads;
  const int64_t n_candidates = a.window.n_candidates + a.extra.n_candidates;
  const int64_t n_tiles = std::max<int64_t>(1, (n_candidates + kTile - 1) / kTile);
  // Runs a query: one when the queries alone give every SM a block, else enough to. Decode rows
  // over their own caches always split into runs of kRowRunTiles, so that a row's bits are
  // those of its call alone whatever the batch (and whatever -1 columns the batch's widest
  // pick list adds: a run of none adds zeros).
  const int64_t blocks = n_tokens * head_blocks;
  const int64_t wanted = std::min<int64_t>(n_tiles, (sm_count() + blocks - 1) / blocks);
  Runs runs;
  runs.split = a.window.addresses != nullptr || wanted > 1;
  runs.tiles_per_run = a.window.addresses != nullptr
                           ? kRowRunTiles
                           : static_cast<int>((n_tiles + wanted - 1) / wanted);
  runs.n_runs = static_cast<int>((n_tiles + runs.tiles_per_run - 1) / runs.tiles_per_run);
  const int64_t n_rows = n_tokens * a.n_heads;
  runs.n_rows = n_rows;
  Scratch scratch(runs.split ? static_cast<size_t>(runs.n_runs * n_rows) *
                                   (kDims * sizeof(float) + sizeof(float2))
                             : 0);
  if (runs.split) {
    runs.partial = scratch.as<float>();
    runs.max_sum = reinterpret_cast<float2*>(runs.partial + runs.n_runs * n_rows * kDims);
  }
  static const bool configured = [] {
    DSV4_CUDA_CHECK(cudaFuncSetAttribute(sparse_attention_bf16_kernel,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(sizeof(Smem))));
    return true;
  }();
  (void)configured;
  sparse_attention_bf16_kernel<<<static_cast<unsigned>(blocks * runs.n_runs), kThreads,
                                 sizeof(Smem), op_stream()>>>(a, head_blocks, runs);
  check_launch();
  if (runs.split) {
    combine_runs_kernel<<<static_cast<unsigned>(n_rows), 128, 0, op_stream()>>>(a, runs);
    check_launch();
  }
}

}  // namespace dsv4::kernels::cuda

// cuda::indexer_scores_fp8, the fast profile's indexer scores (DeepSeek-V3.2's act_quant and
// fp8_index): a block per (query t, 64 entries). It quantizes the entries' keys to E4M3 (a warp a
// row: amax, the power-of-two scale, cvt.rn.satfinite, bit for bit the CPU reference's values),
// then for each 64 heads of the query their rows the same way, multiplies heads × entries on the
// FP8 tensor cores (mma.sync m16n8k32, f32 accumulators; a warp 16 heads), and reduces
// ReLU(dot) · head weight over the heads: within a warp by shuffles, across the four warps in
// warp order, times the entry's scale. Past a few blocks an SM (decode rows over long
// contexts), a block takes several tiles of 64 entries in turn, its queries quantized once (one
// head pass, HI ≤ 64) for all of them.
//
// A warp's rows are loaded all at once before any is reduced (a decode block's 64 keys and 64
// queries are two load latencies, not 32 a warp), and the keys' loads wait on the per-row address
// table while the queries' are in flight.
//
// Few rows (a decode step: T · N / 16 tiles within one wave) take tiles of 16 entries and eight
// warps a block: a block's chain of rows to quantize is 8 queries and 2 keys a warp instead of
// 16 and 16, and a 68-entry row is 5 blocks instead of 2. The first four warps multiply (16 heads
// each) as in a 64-entry tile. An entry's score is the same sum in either: its heads' products
// (one mma element each), a warp's 16 heads by the same shuffle tree, passes of 64 heads in
// order, the four warps in order, each f32 step rounded alone (_rn: ptxas fuses none into an
// FMA), so its bits do not depend on the tile a plan gives it (a decode row alone and in a
// padded batch).
//
// A call whose queries share their keys (a prompt's: every query scores the sequence's entries)
// does not quantize a key once a query: one launch quantizes every key and query head row once,
// and the scoring blocks read E4M3 rows ("Shared keys" below), each key tile once for a group of
// queries. The same bytes, scales and sums, so the same bits.
//
// Dimension letters: T tokens, HI indexer heads, DI indexer head dim (≤ 128, padded to 128 with
// zeros), N compressed entries.
#include <cuda_fp8.h>

#include <algorithm>

#include "kernels/contracts.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/device/fp8_mma.cuh"
#include "kernels/cuda/device/mma_sync.cuh"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/stream.h"
#include "kernels/fp8_scale.h"

namespace dsv4::kernels::cuda {
namespace {

constexpr int kHeads = 64;              // heads a pass (the M: 16 a warp)
constexpr int kMmaWarps = kHeads / 16;  // the warps that multiply, 16 heads each
constexpr int kDims = 128;              // DI padded
constexpr int kPitch = kDims + 16;  // bytes a quantized row: rows g = 0 … 7 start in distinct banks
constexpr int kMaxTilesPerBlock = 8;

// A block's shape: kEntries entries a tile (the N of the products), kWarps warps quantizing its
// rows, of which the first kMmaWarps multiply.
template <int kEntriesT, int kWarpsT>
struct Tile {
  static constexpr int kEntries = kEntriesT, kWarps = kWarpsT, kThreads = 32 * kWarps;
  static_assert(kEntries % 16 == 0 && kWarps >= kMmaWarps && kThreads >= kHeads &&
                kThreads >= kEntries);
  struct Smem {
    uint8_t keys[kEntries][kPitch];
    uint8_t queries[kHeads][kPitch];
    float key_scale[kEntries];
    float query_scale[kHeads];
    float head_weight[kHeads];
    float partial[kMmaWarps][kEntries];
  };
};
using WideTile = Tile<64, 4>;    // prefill and long contexts
using NarrowTile = Tile<16, 8>;  // few rows

struct ScoreArgs {
  const float* q;        // [T, HI, DI]
  const float* keys;     // [N, DI]
  const float* weights;  // [T, HI]
  IndexerDims dims;
  float q_scale, weight_scale;
  float* scores;            // [T, N]
  int tiles_per_block = 1;  // entry tiles of kEntries a block

  ScoreArgs(const IndexerScoreParams& p, const IndexerDims& d)
      : q(p.q.data_as<const float>()),
        keys(p.keys.data_as<const float>()),
        weights(p.weights.data_as<const float>()),
        dims(d),
        q_scale(p.q_scale),
        weight_scale(p.weight_scale),
        scores(p.scores.data_as<float>()) {}
};

// This lane's 4-value group of a row of DI floats (zeros past DI, up to 128, and for nullptr: a
// zero row).
__device__ float4 load_group(const float* row, int head_dim) {
  const int d = 4 * (threadIdx.x % 32);
  if (row != nullptr && d < head_dim) return *reinterpret_cast<const float4*>(row + d);
  return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

// A row, as the warp's lanes' groups v, into E4M3 bytes at dst; returns its scale (in every
// lane).
__device__ float quantize_group(float4 v, uint8_t* dst) {
  const int d = 4 * (threadIdx.x % 32);
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

// Rows r = warp, warp + kWarps, … < kRows of a tile (row_of(r): its DI floats, or nullptr) into
// dst[r], their scales into scales[r]: the warp's loads all issued before the first reduction.
template <int kRows, int kWarps, typename RowOf>
__device__ void quantize_rows(RowOf row_of, int head_dim, uint8_t (*dst)[kPitch], float* scales) {
  constexpr int kPerWarp = kRows / kWarps;
  static_assert(kRows % kWarps == 0);
  const int warp = threadIdx.x / 32;
  float4 v[kPerWarp];
#pragma unroll
  for (int i = 0; i < kPerWarp; ++i) v[i] = load_group(row_of(warp + i * kWarps), head_dim);
#pragma unroll
  for (int i = 0; i < kPerWarp; ++i) {
    const int r = warp + i * kWarps;
    const float scale = quantize_group(v[i], dst[r]);
    if (threadIdx.x % 32 == 0) scales[r] = scale;
  }
}

// This warp's 16 heads of the pass (warp < kMmaWarps) times the tile's keys on the FP8 tensor
// cores, each entry's ReLU(dot) · head weight summed over the 16 heads (the lanes' two rows,
// then the eight row groups by a fixed shuffle tree) into key_sum: thread (g, c) holds entries
// 8n + 2c and + 1.
template <int kEntries>
__device__ void multiply_heads(const uint8_t (*queries)[kPitch], const uint8_t (*keys)[kPitch],
                               const float* head_weight, int head_dim,
                               float (&key_sum)[kEntries / 8][2]) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, c = lane % 4;
  const int k_steps = (head_dim + 31) / 32;
  float dot[kEntries / 8][4] = {};
  const uint8_t* q_lo = queries[16 * warp + g];
  const uint8_t* q_hi = queries[16 * warp + g + 8];
  for (int k = 0; k < k_steps; ++k) {
    const int d = 32 * k + 4 * c;
    const uint32_t qa[4] = {*reinterpret_cast<const uint32_t*>(q_lo + d),
                            *reinterpret_cast<const uint32_t*>(q_hi + d),
                            *reinterpret_cast<const uint32_t*>(q_lo + d + 16),
                            *reinterpret_cast<const uint32_t*>(q_hi + d + 16)};
#pragma unroll
    for (int n = 0; n < kEntries / 8; ++n) {
      const uint8_t* key = keys[8 * n + g];
      mma_e4m3_16832(dot[n], qa, *reinterpret_cast<const uint32_t*>(key + d),
                     *reinterpret_cast<const uint32_t*>(key + d + 16), dot[n]);
    }
  }
  const float w_lo = head_weight[16 * warp + g], w_hi = head_weight[16 * warp + g + 8];
#pragma unroll
  for (int n = 0; n < kEntries / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float v =
          __fmaf_rn(fmaxf(dot[n][e], 0.0f), w_lo, __fmul_rn(fmaxf(dot[n][e + 2], 0.0f), w_hi));
      v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 4));
      v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 8));
      v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 16));
      key_sum[n][e] = __fadd_rn(key_sum[n][e], v);
    }
  }
}

// A tile's scores out: the multiplying warps' sums (key_sum, multiply_heads') added in warp
// order through `partial`, times each entry's key scale, into the scores row of entries
// [n0, n0 + kEntries) below n_keys.
template <int kEntries>
__device__ __forceinline__ void store_scores(const float (&key_sum)[kEntries / 8][2],
                                             float (*partial)[kEntries], const float* key_scale,
                                             int64_t n0, int64_t n_keys, float* scores_row) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, c = lane % 4;
  if (warp < kMmaWarps && g == 0) {
#pragma unroll
    for (int n = 0; n < kEntries / 8; ++n) {
      partial[warp][8 * n + 2 * c] = key_sum[n][0];
      partial[warp][8 * n + 2 * c + 1] = key_sum[n][1];
    }
  }
  __syncthreads();
  if (threadIdx.x < kEntries && n0 + threadIdx.x < n_keys) {
    float total = 0.0f;
    for (int w = 0; w < kMmaWarps; ++w) total = __fadd_rn(total, partial[w][threadIdx.x]);
    scores_row[n0 + threadIdx.x] = __fmul_rn(total, key_scale[threadIdx.x]);
  }
}

// Query t's scores of the entry tile [n0, n0 + kEntries) (keys: its keys, n_keys of them). With
// quantize_queries false the queries, their scales and head weights in shared memory are those a
// previous tile quantized (one head pass: they do not change).
template <typename T>
__device__ void score_tile(const ScoreArgs& a, typename T::Smem& s, int64_t t, const float* keys,
                           int64_t n_keys, int64_t n0, bool quantize_queries) {
  constexpr int kEntries = T::kEntries, kWarps = T::kWarps;
  const int n_heads = static_cast<int>(a.dims.n_heads),
            head_dim = static_cast<int>(a.dims.head_dim);
  const int warp = threadIdx.x / 32;
  float key_sum[kEntries / 8][2] = {};  // this thread's columns 8n + 2c, + 1: Σ over heads
  for (int h0 = 0; h0 < n_heads; h0 += kHeads) {
    // Thread r < kHeads: head h0 + r's weight, loaded while the rows are.
    const int h_own = h0 + static_cast<int>(threadIdx.x);
    const float weight = quantize_queries && threadIdx.x < kHeads && h_own < n_heads
                             ? a.weights[t * n_heads + h_own]
                             : 0.0f;
    __syncthreads();  // the previous pass's (or tile's) products read the queries and keys
    if (quantize_queries) {
      quantize_rows<kHeads, kWarps>(
          [&](int r) {
            return h0 + r < n_heads ? a.q + (t * n_heads + h0 + r) * head_dim : nullptr;
          },
          head_dim, s.queries, s.query_scale);
    }
    if (h0 == 0) {
      quantize_rows<kEntries, kWarps>(
          [&](int r) { return n0 + r < n_keys ? keys + (n0 + r) * head_dim : nullptr; }, head_dim,
          s.keys, s.key_scale);
    }
    __syncthreads();
    if (quantize_queries) {
      if (threadIdx.x < kHeads) {
        s.head_weight[threadIdx.x] =
            h_own < n_heads ? __fmul_rn(__fmul_rn(weight, a.weight_scale),
                                        __fmul_rn(a.q_scale, s.query_scale[threadIdx.x]))
                            : 0.0f;
      }
      __syncthreads();
    }
    if (warp < kMmaWarps) {
      multiply_heads<kEntries>(s.queries, s.keys, s.head_weight, head_dim, key_sum);
    }
  }
  store_scores<kEntries>(key_sum, s.partial, s.key_scale, n0, n_keys,
                         a.scores + t * a.dims.n_entries);
}

// A block per (query t, tiles_per_block entry tiles).
template <typename T>
__global__ void __launch_bounds__(T::kThreads) indexer_fp8_kernel(ScoreArgs a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  auto& s = *reinterpret_cast<typename T::Smem*>(smem_raw);
  const int64_t t = blockIdx.x;
  const float* keys = row_keys(a.dims, a.keys, t);
  const int64_t n_keys = row_n_keys(a.dims, t);
  for (int i = 0; i < a.tiles_per_block; ++i) {
    const int64_t n0 = (int64_t{blockIdx.y} * a.tiles_per_block + i) * T::kEntries;
    if (n0 >= n_keys) return;
    score_tile<T>(a, s, t, keys, n_keys, n0, i == 0 || a.dims.n_heads > kHeads);
  }
}

// ---- Shared keys (a prompt's call): keys and queries quantized once a call ----
// A prompt's queries all score the same keys, so one launch quantizes every key and query head
// row once (quantize_group, the same bytes and scales as a tile's own quantization) with each
// row's head weight, and the scoring blocks read E4M3 rows: a block takes a tile of 64 keys
// and a group of queries, loading the keys once for the group and each query's head rows into
// one buffer while the other's multiply. An entry's score is the same sum in the same order as
// in a 64- or 16-entry tile (IndexerScoresFp8KeepTheirBitsAcrossTileWidths).
constexpr int kRowBytes = kDims;  // a quantized row in global memory: DI values, zeros to 128
constexpr int kMaxGroupQueries = 16;
constexpr int kGroupThreads = 32 * kMmaWarps;

struct QuantizedRows {
  uint8_t* keys;        // [N][128]
  float* key_scales;    // [N]
  uint8_t* queries;     // [T · HI][128]
  float* head_weights;  // [T · HI]: (weights · weight_scale) · (q_scale · s_q)
};

// Warp w of the grid quantizes row w: key rows first, then query head rows with their weights.
__global__ void quantize_call_rows_kernel(ScoreArgs a, QuantizedRows out) {
  const int64_t n_keys = a.dims.n_entries, n_query_rows = a.dims.n_tokens * a.dims.n_heads;
  const int head_dim = static_cast<int>(a.dims.head_dim);
  const int64_t warps = int64_t{gridDim.x} * blockDim.x / 32;
  for (int64_t r = (int64_t{blockIdx.x} * blockDim.x + threadIdx.x) / 32; r < n_keys + n_query_rows;
       r += warps) {
    if (r < n_keys) {
      const float scale =
          quantize_group(load_group(a.keys + r * head_dim, head_dim), out.keys + r * kRowBytes);
      if (threadIdx.x % 32 == 0) out.key_scales[r] = scale;
      continue;
    }
    const int64_t q = r - n_keys;
    const float scale =
        quantize_group(load_group(a.q + q * head_dim, head_dim), out.queries + q * kRowBytes);
    if (threadIdx.x % 32 == 0) {
      out.head_weights[q] =
          __fmul_rn(__fmul_rn(a.weights[q], a.weight_scale), __fmul_rn(a.q_scale, scale));
    }
  }
}

struct GroupSmem {
  uint8_t keys[WideTile::kEntries][kPitch];
  uint8_t queries[2][kHeads][kPitch];
  float key_scale[WideTile::kEntries];
  float head_weight[2][kHeads];
  float partial[kMmaWarps][WideTile::kEntries];
};

// Rows [0, kRows) of a quantized tile into dst by 16-byte cp.async (zeros for a row r with
// !valid(r)), 8 copies a row.
template <int kRows, typename Valid>
__device__ void copy_quantized_rows(const uint8_t* first, Valid valid, uint8_t (*dst)[kPitch]) {
  for (int i = threadIdx.x; i < kRows * (kRowBytes / 16); i += kGroupThreads) {
    const int r = i / (kRowBytes / 16), part = i % (kRowBytes / 16);
    const bool ok = valid(r);
    cp_async16(&dst[r][16 * part], ok ? first + r * kRowBytes + 16 * part : first, ok);
  }
}

// Block (group, tile): the scores of keys [64 · tile, + 64) for queries [group · G, + G), one
// (query, 64-head pass) a step: the next step's head rows and weights land in one buffer while
// this step's multiply from the other.
__global__ void __launch_bounds__(kGroupThreads)
    indexer_fp8_group_kernel(ScoreArgs a, QuantizedRows rows, int group_queries) {
  constexpr int kEntries = WideTile::kEntries;
  __shared__ GroupSmem s;
  const int64_t n_keys = a.dims.n_entries, n_heads = a.dims.n_heads;
  const int64_t n0 = int64_t{blockIdx.y} * kEntries;
  const int64_t t0 = int64_t{blockIdx.x} * group_queries;
  const int64_t n_queries = std::min<int64_t>(group_queries, a.dims.n_tokens - t0);
  const int64_t passes = (n_heads + kHeads - 1) / kHeads;
  const int64_t steps = n_queries * passes;
  const int head_dim = static_cast<int>(a.dims.head_dim);

  copy_quantized_rows<kEntries>(
      rows.keys + n0 * kRowBytes, [&](int r) { return n0 + r < n_keys; }, s.keys);
  if (threadIdx.x < kEntries) {
    const bool valid = n0 + threadIdx.x < n_keys;
    cp_async4(&s.key_scale[threadIdx.x], rows.key_scales + (valid ? n0 + threadIdx.x : 0), valid);
  }
  // Step i's head rows (query t0 + i / passes, heads h0 … h0 + 63) into buffer i % 2.
  const auto load_step = [&](int64_t i) {
    const int64_t t = t0 + i / passes, h0 = i % passes * kHeads;
    const int buffer = static_cast<int>(i % 2);
    copy_quantized_rows<kHeads>(
        rows.queries + (t * n_heads + h0) * kRowBytes, [&](int r) { return h0 + r < n_heads; },
        s.queries[buffer]);
    if (threadIdx.x < kHeads) {
      const bool valid = h0 + threadIdx.x < n_heads;
      cp_async4(&s.head_weight[buffer][threadIdx.x],
                rows.head_weights + t * n_heads + (valid ? h0 + threadIdx.x : 0), valid);
    }
  };
  load_step(0);
  cp_async_commit();
  float key_sum[kEntries / 8][2] = {};
  for (int64_t i = 0; i < steps; ++i) {
    if (i + 1 < steps) load_step(i + 1);  // its buffer's readers passed the last barrier
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();  // step i's rows (and the keys) landed
    multiply_heads<kEntries>(s.queries[i % 2], s.keys, s.head_weight[i % 2], head_dim, key_sum);
    if (i % passes == passes - 1) {
      const int64_t t = t0 + i / passes;
      store_scores<kEntries>(key_sum, s.partial, s.key_scale, n0, n_keys,
                             a.scores + t * a.dims.n_entries);
#pragma unroll
      for (int n = 0; n < kEntries / 8; ++n) key_sum[n][0] = key_sum[n][1] = 0.0f;
    }
    __syncthreads();  // every warp done with buffer i % 2 (step i + 2's) and with `partial`
  }
}

// The shared-keys path: the call's rows quantized into scratch, then the scoring blocks, with
// the fewest queries a group that still gives the SMs about eight blocks each.
Status score_with_shared_keys(const ScoreArgs& a) {
  const int64_t n_keys = a.dims.n_entries, n_query_rows = a.dims.n_tokens * a.dims.n_heads;
  const int64_t code_bytes = (n_keys + n_query_rows) * kRowBytes;
  static_assert(kRowBytes + sizeof(float) == kIndexerFp8RowBytes);
  DSV4_ASSIGN_OR_RETURN(
      const Scratch scratch,
      Scratch::allocate(static_cast<size_t>((n_keys + n_query_rows) * kIndexerFp8RowBytes)));
  QuantizedRows rows;
  rows.keys = scratch.as<uint8_t>();
  rows.queries = rows.keys + n_keys * kRowBytes;
  rows.key_scales = reinterpret_cast<float*>(rows.keys + code_bytes);
  rows.head_weights = rows.key_scales + n_keys;
  const int64_t row_warps = n_keys + n_query_rows;
  const unsigned blocks = static_cast<unsigned>(
      std::min<int64_t>(ceil_div(row_warps * 32, kElementThreads), 8 * int64_t{sm_count()}));
  quantize_call_rows_kernel<<<blocks, kElementThreads, 0, op_stream()>>>(a, rows);
  check_launch();
  const int64_t n_tiles = ceil_div(n_keys, int64_t{WideTile::kEntries});
  const int group = static_cast<int>(std::clamp<int64_t>(
      a.dims.n_tokens * n_tiles / (8 * int64_t{sm_count()}), 1, kMaxGroupQueries));
  const dim3 grid(static_cast<unsigned>(ceil_div(a.dims.n_tokens, int64_t{group})),
                  static_cast<unsigned>(n_tiles));
  indexer_fp8_group_kernel<<<grid, kGroupThreads, 0, op_stream()>>>(a, rows, group);
  check_launch();
  return ok_status();
}

template <typename T>
void launch_scores(const ScoreArgs& a, int64_t n_tiles) {
  static_assert(sizeof(typename T::Smem) <= 48 * 1024);
  const dim3 grid(static_cast<unsigned>(a.dims.n_tokens),
                  static_cast<unsigned>(ceil_div(n_tiles, int64_t{a.tiles_per_block})));
  indexer_fp8_kernel<T><<<grid, T::kThreads, sizeof(typename T::Smem), op_stream()>>>(a);
  check_launch();
}

}  // namespace

Status indexer_scores_fp8(const IndexerScoreParams& p) {
  const IndexerDims dims = indexer_fp8_dims(p);
  if (dims.n_tokens * dims.n_entries == 0) return ok_status();
  ScoreArgs a(p, dims);
  // Few rows (the narrow tiles within one wave): a narrow tile a block.
  const int64_t n_narrow = ceil_div(dims.n_entries, int64_t{NarrowTile::kEntries});
  if (dims.n_tokens * n_narrow <= sm_count()) {
    launch_scores<NarrowTile>(a, n_narrow);
    return ok_status();
  }
  if (dims.key_addresses == nullptr) return score_with_shared_keys(a);
  // Tiles a block: one while the grid is at most about four blocks an SM, else up to
  // kMaxTilesPerBlock, so that a long context's blocks (B = 32 at 64k: 8192 tiles) quantize their
  // queries once for several tiles instead of once a tile.
  const int64_t n_tiles = ceil_div(dims.n_entries, int64_t{WideTile::kEntries});
  a.tiles_per_block = static_cast<int>(std::clamp<int64_t>(
      dims.n_tokens * n_tiles / (4 * int64_t{sm_count()}), 1, kMaxTilesPerBlock));
  launch_scores<WideTile>(a, n_tiles);
  return ok_status();
}

}  // namespace dsv4::kernels::cuda

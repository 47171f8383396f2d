// cuda::sparse_attention_bf16, the fast profile's sparse attention on bf16 tensor cores (the
// design of FlashMLA's sparse kernels, written for mma.sync): every head of a query shares the
// query's candidate rows, so a block takes one query and 64 of its heads (the M of the GEMMs)
// and walks the candidates in tiles of 32 (the N of q·kᵀ, the K of p·v), with an online softmax
// in f32. K = V: one staged tile serves both products.
//
// The caches are f32 (shared with the exact profile). Where a call's queries read each row many
// times (a prompt's: 256 queries × 640 candidates over ~900 rows), one launch first rounds its
// rows to a bf16 copy (reads_a_copy), and the tiles come from the copy by cp.async straight into
// kCopyStages operand tiles, two ahead of the one computing: half the bytes an f32 row takes,
// and no pass over shared memory to round them. Otherwise (decode rows over their pooled caches,
// a short chunk over a long cache) a tile's f32 rows arrive by cp.async into a staging buffer
// while the previous tile computes, then one pass rounds them to bf16 into the operand tile.
// Either way an operand row is padded by 16 bytes (ldmatrix's eight row addresses hit distinct
// banks) and holds the same bf16 values (round to nearest even, zeros past the head dim).
// A warp pair per 16 heads (R pairs a block, 64 heads at R = 4): warp w takes heads 16·(w % R)
// … + 15 and head dims 256·(w / R) … + 255 of the output (128 f32 accumulators a thread); for
// the logits each warp of a pair multiplies its half of the dims and the pair adds the two
// halves through shared memory (a + b in both warps: the same bits), so each logit is computed
// once.
//
// Prefill (enough queries to fill the GPU): one block per (query, 64 heads), the whole candidate
// list. Decode: a query's candidates are split into runs of whole tiles over more blocks (split-K
// style), each writing its unnormalised output with its running max and sum, and a combine
// kernel adds the runs and the sink, so a single query still spreads over the SMs.
//
// Heads a block: 64 (four warp pairs) for a prefill and for decode rows (at most kDecodeRows
// queries) whose grid passes one wave; below that 32 or 16 (two or one pair), the fewest that
// keep the grid to one wave. A decode block is latency-bound: it reads its heads' queries (128 KB
// f32 for 64 heads), one tile and writes its heads' partial rows, so a quarter of the heads is a
// quarter of its bytes over four times the SMs.
//
// Bits. A head's arithmetic is its warp pair's whatever the pairs a block, and every f32 step of
// the softmax and of the normalisation is rounded on its own (the _rn intrinsics, which neither
// the compiler nor ptxas fuses into an FMA): how ptxas schedules one instantiation or one path
// cannot move a product into an FMA in one and not in another. So a row's bits are the same in
// a block of 16, 32 or 64 heads, from its f32 rows or their bf16 copy
// (FastSparseAttentionGivesTheSameBitsFromACopyOfItsRows), over one run or split and combined
// (the direct path divides as the combine does for one run: the same helpers in the same order),
// alone or in a batch
// (DecodeRowsCudaTest.FastSparseAttentionRowsAreTheirSingleCalls), and a replayed decode graph's
// are the eager step's.
//
// Dimension letters: T tokens, H heads, Dh head dim (≤ 512, padded to 512), K candidates.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/attention/candidates.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/device/fp8_quantize.cuh"
#include "kernels/cuda/device/mma_sync.cuh"
#include "kernels/cuda/device/pdl.cuh"
#include "kernels/cuda/device/rope_turn.cuh"
#include "kernels/cuda/scratch.h"
#include "kernels/cuda/stream.h"
#include "kernels/fp8_operands.h"

namespace dsv4::kernels::cuda {
namespace {

constexpr int kDims = 512;            // head dims a block computes (smaller ones zero-padded)
constexpr int kTile = 32;             // candidates a tile
constexpr int kMaxHeadRows = 4;       // head rows of 16 a block: 64 heads, the M of both products
constexpr int kHalfDims = kDims / 2;  // a warp's output dims
constexpr int kRowPitch = kDims + 8;  // bf16 a staged row: 1040 bytes, 16 past a bank cycle
constexpr float kLog2e = 1.4426950408889634f;
// Queries a call may have for its blocks to take fewer than 64 heads: a decode step's rows at
// the batches the engine steps; a prefill's chunk keeps its 64-head blocks.
constexpr int64_t kDecodeRows = 16;
// Tiles a run of a decode row over its own cache: V4-Flash's 640 candidates in 20 runs, so that
// one row takes 20 SMs.
constexpr int kRowRunTiles = 1;
// kernels/ops.h sizes a decode row's runs (attention_runs_bytes_a_row) by these.
static_assert(kTile * kRowRunTiles == kAttentionRunCandidates && kDims == 512);
// Operand tiles a block reading a bf16 copy keeps: the one computing and two in flight.
constexpr int kCopyStages = 3;
// A call reads a bf16 copy of its rows when its queries read at least this many rows for each
// row copied: the copy reads an f32 row and writes a bf16 one (6 bytes a value) to save 2 bytes
// a value at each read, and the rounding pass through shared memory.
constexpr int64_t kCopyReadsPerRow = 3;

// A block of kHeadRows head rows of 16: a warp pair each (the row's two dim halves).
template <int kHeadRows>
struct Block {
  static_assert(kHeadRows >= 1 && kHeadRows <= kMaxHeadRows);
  static constexpr int kHeads = 16 * kHeadRows;
  static constexpr int kWarps = 2 * kHeadRows;
  static constexpr int kThreads = 32 * kWarps;
  // Staging a tile: 8 threads a row, so each thread stages kStagePasses rows.
  static constexpr int kStagePasses = kTile * 8 / kThreads;
  // The queries as float4 loads a thread (32 whatever the rows), kQueryBatch in flight at once.
  static constexpr int kQueryLoads = kHeads * kDims / 4 / kThreads;
  static constexpr int kQueryBatch = 16;
  static_assert(kQueryLoads % kQueryBatch == 0);

  // Reading f32 rows: the next tile staged as it arrives, then rounded into the operand tile.
  struct StagedSmem {
    __nv_bfloat16 q[kHeads][kRowPitch];
    __nv_bfloat16 kv[1][kTile][kRowPitch];
    float staging[kTile][kDims];      // the next tile as it arrives, f32
    float logits[kWarps][16][kTile];  // each warp's half of the logits
    int32_t rows[2][kTile];           // the staged tiles' kv rows (−1: none)
  };
  // Reading a bf16 copy: each tile copied straight into its operand tile.
  struct CopiedSmem {
    __nv_bfloat16 q[kHeads][kRowPitch];
    __nv_bfloat16 kv[kCopyStages][kTile][kRowPitch];
    float logits[kWarps][16][kTile];
    int32_t rows[kCopyStages][kTile];
  };
};

// A call's rows rounded to bf16 (round_rows_kernel), `pitch` values a row (the head dim rounded
// up to 8, so a row is whole 16-byte copies; zeros past the head dim); null when the call reads
// its f32 rows.
struct CopiedRows {
  const __nv_bfloat16* window = nullptr;
  const __nv_bfloat16* extra = nullptr;
  int64_t pitch = 0;
};

// A warp's state across tiles: rows g and g + 8 of its 16 heads (g = lane / 4), its 256 dims.
struct WarpRows {
  float running_max[2], running_sum[2];
  float out[kHalfDims / 8][4];
};

// Where the output also goes as wo_a's input (SparseAttentionParams::out_fp8): each row's last
// 2P dims turned back at its position, then the row quantized as rope_fp8 quantizes it (a
// head's groups of 128 dims its own); codes null when the call asks for none.
struct RopeFp8 {
  const int64_t* positions = nullptr;  // [T]
  const float* inv_freq = nullptr;     // [P]
  int64_t first_pair = 0;              // Dh − 2P, even
  Fp8Out q{};
  __device__ bool wanted() const { return q.codes != nullptr; }
};

// Dims (d, d + 1) of a row, a rope pair, turned back by `turn` (rope_fp8's expression, with the
// turn of turn_at(position, inv_freq, −1)).
__device__ __forceinline__ float2 turned_back(float2 v, Turn turn) {
  float pair[2];
  turn_pair(pair, v.x, v.y, turn);
  return make_float2(pair[0], pair[1]);
}

// The scale of the group of query t's row that starts at column `col` (a multiple of 128).
__device__ __forceinline__ float& group_scale(const RopeFp8& r, int64_t t, int64_t col) {
  return r.q.row_scales(t)[col / kFp8Group];
}

// Columns col, col + 1 of query t's [H·Dh] row as codes of their group's scale.
__device__ __forceinline__ void store_codes(const RopeFp8& r, int64_t t, int64_t col, float2 v,
                                            float scale) {
  const uint16_t codes = static_cast<uint16_t>(fp8_activation_code(v.x, scale)) |
                         static_cast<uint16_t>(fp8_activation_code(v.y, scale)) << 8;
  *reinterpret_cast<uint16_t*>(r.q.row_codes(t) + col) = codes;
}

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

// The softmax's and the normalisation's steps, each rounded alone (see "Bits" above).

// Head h's sink in log2 units: where its running max starts.
__device__ __forceinline__ float sink_log2(const AttentionArgs& a, int64_t h) {
  return __fmul_rn(a.sinks[h], kLog2e);
}
// 2^(x − max): a probability, or the weight of a run or a sum rescaled to a new max.
__device__ __forceinline__ float exp2_from(float x, float max) { return exp2f(__fsub_rn(x, max)); }

// A row's normalisation from its runs' (max, sum) pairs (max_sum(r), r < n_runs) in run order:
// M = max(sink, m_r), denom = 2^(sink − M) + Σ_r 2^(m_r − M) · l_r. The direct path calls it with
// its one run, so it divides by what the combine divides by.
struct Normaliser {
  float max_all, denom;
};
template <typename MaxSum>
__device__ Normaliser normaliser(float sink, int n_runs, MaxSum max_sum) {
  float max_all = sink;
  for (int r = 0; r < n_runs; ++r) max_all = fmaxf(max_all, max_sum(r).x);
  float denom = exp2_from(sink, max_all);
  for (int r = 0; r < n_runs; ++r) {
    const float2 ms = max_sum(r);
    denom = __fmaf_rn(exp2_from(ms.x, max_all), ms.y, denom);
  }
  return {max_all, denom};
}
// A run's weighted partial value added to the sum of the runs before it.
__device__ __forceinline__ float add_run(float sum, float weight, float partial) {
  return __fmaf_rn(weight, partial, sum);
}

// Candidates [c0, c0 + kTile) of query t into the staging buffer (cp.async; zeros past the head
// dim and for a missing candidate, whose row is listed −1): a row per 8 threads, 16 bytes each a
// step, and the rows list of the tile. A thread's rows are looked up before any copy is issued,
// so their index loads are in flight together.
template <int kHeadRows, typename Smem>
__device__ void stage_tile(const AttentionArgs& a, int64_t t, int64_t c0, int64_t c_end,
                           int64_t n_extra_visible, Smem& s, int buffer) {
  using B = Block<kHeadRows>;
  const int part = threadIdx.x % 8;
  const float* src[B::kStagePasses];
  int32_t rows[B::kStagePasses];
#pragma unroll
  for (int i = 0; i < B::kStagePasses; ++i) {
    const int64_t j = c0 + (threadIdx.x + i * B::kThreads) / 8;
    rows[i] = j < c_end ? candidate_row(a, t, j, n_extra_visible) : -1;
    const float* kv =
        j < a.window.n_candidates ? source_rows(a.window, t) : source_rows(a.extra, t);
    src[i] = rows[i] >= 0 ? kv + int64_t{rows[i]} * a.head_dim : a.q;  // a.q: mapped, not read
  }
#pragma unroll
  for (int i = 0; i < B::kStagePasses; ++i) {
    const int r = (threadIdx.x + i * B::kThreads) / 8;
    for (int d = 4 * part; d < kDims; d += 32) {
      cp_async16(&s.staging[r][d], src[i] + (d < a.head_dim ? d : 0),
                 rows[i] >= 0 && d < a.head_dim);
    }
    if (part == 0) s.rows[buffer][r] = rows[i];
  }
}

// The listed entries of candidates [c0, c0 + kTile) of query t that this thread stages (−1
// past c_end): loaded a tile before stage_copied_tile needs them, so that no warp waits for
// them between two tiles' products.
template <int kHeadRows>
struct Listed {
  int32_t rows[Block<kHeadRows>::kStagePasses];
};
template <int kHeadRows>
__device__ Listed<kHeadRows> list_tile(const AttentionArgs& a, int64_t t, int64_t c0, int64_t c_end,
                                       int64_t n_extra_visible) {
  using B = Block<kHeadRows>;
  Listed<kHeadRows> listed;
#pragma unroll
  for (int i = 0; i < B::kStagePasses; ++i) {
    const int64_t j = c0 + (threadIdx.x + i * B::kThreads) / 8;
    listed.rows[i] = j < c_end ? listed_row(a, t, j, n_extra_visible) : -1;
  }
  return listed;
}

// Candidates [c0, c0 + kTile) of query t from the bf16 copy straight into operand tile
// `buffer` (cp.async; zeros past the copy's pitch and for a missing candidate): a row per 8
// threads as stage_tile, 16 bytes (8 values) each a step, and the rows list of the tile.
template <int kHeadRows, typename Smem>
__device__ void stage_copied_tile(const AttentionArgs& a, const CopiedRows& copied, int64_t t,
                                  int64_t c0, const Listed<kHeadRows>& listed, Smem& s,
                                  int buffer) {
  using B = Block<kHeadRows>;
  const int part = threadIdx.x % 8;
#pragma unroll
  for (int i = 0; i < B::kStagePasses; ++i) {
    const int r = (threadIdx.x + i * B::kThreads) / 8;
    const int64_t j = c0 + r;
    const int32_t row = listed.rows[i] < 0 ? -1 : checked_row(a, t, j, listed.rows[i]);
    const __nv_bfloat16* src = j < a.window.n_candidates ? copied.window : copied.extra;
    src = row >= 0 ? src + int64_t{row} * copied.pitch : copied.window;  // mapped, not read
    for (int d = 8 * part; d < kDims; d += 64) {
      cp_async16(&s.kv[buffer][r][d], src + (d < copied.pitch ? d : 0),
                 row >= 0 && d < copied.pitch);
    }
    if (part == 0) s.rows[buffer][r] = row;
  }
}

// The block's heads' queries of token t, rounded to bf16 (zeros past the heads and the head dim):
// kQueryBatch loads a thread issued before any is used, so the block waits a load latency a
// batch, not one a load.
template <int kHeadRows, typename Smem>
__device__ void load_queries(const AttentionArgs& a, int64_t t, int64_t h0, Smem& s) {
  using B = Block<kHeadRows>;
  for (int batch = 0; batch < B::kQueryLoads; batch += B::kQueryBatch) {
    float4 v[B::kQueryBatch];
#pragma unroll
    for (int k = 0; k < B::kQueryBatch; ++k) {
      const int i = threadIdx.x + (batch + k) * B::kThreads;
      const int h = i / (kDims / 4), d = 4 * (i % (kDims / 4));
      v[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (h0 + h < a.n_heads && d < a.head_dim) {
        v[k] = *reinterpret_cast<const float4*>(a.q + ((t * a.n_heads + h0 + h) * a.head_dim + d));
      }
    }
#pragma unroll
    for (int k = 0; k < B::kQueryBatch; ++k) {
      const int i = threadIdx.x + (batch + k) * B::kThreads;
      const int h = i / (kDims / 4), d = 4 * (i % (kDims / 4));
      *reinterpret_cast<uint2*>(&s.q[h][d]) =
          make_uint2(pack_bf16(v[k].x, v[k].y), pack_bf16(v[k].z, v[k].w));
    }
  }
}

// The staged f32 tile rounded to bf16 into the operand tile.
template <int kThreads, typename Smem>
__device__ void round_tile(Smem& s) {
  for (int i = threadIdx.x; i < kTile * kDims / 4; i += kThreads) {
    const int r = i / (kDims / 4), d = 4 * (i % (kDims / 4));
    const float4 v = *reinterpret_cast<const float4*>(&s.staging[r][d]);
    *reinterpret_cast<uint2*>(&s.kv[0][r][d]) =
        make_uint2(pack_bf16(v.x, v.y), pack_bf16(v.z, v.w));
  }
}

// Barrier of the two warps that share head rows (ids 1 … 4; 0 is __syncthreads').
__device__ __forceinline__ void pair_barrier(int head_row) {
  asm volatile("bar.sync %0, 64;\n" ::"r"(head_row + 1) : "memory");
}

// One tile of 32 candidates into a warp's rows: its half of the logits (16 heads × 32
// candidates over its 256 dims) added to its pair's half, the online softmax, and out += p · rows.
// `kv` is the operand tile, `rows` its kv rows (−1: none), `logits` the block's exchange buffer.
template <int kHeadRows>
__device__ __forceinline__ void attend_tile(const __nv_bfloat16 (*q)[kRowPitch],
                                            const __nv_bfloat16 (*kv)[kRowPitch],
                                            const int32_t* rows, float (*logits)[16][kTile],
                                            float scale, WarpRows& w) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int head_row = warp % kHeadRows, half = warp / kHeadRows;
  const int g = lane / 4, c = lane % 4;
  float logit[kTile / 8][4] = {};
  for (int k0 = half * kHalfDims; k0 < (half + 1) * kHalfDims; k0 += 16) {
    uint32_t qa[4];
    ldmatrix_x4(qa, &q[16 * head_row + lane % 8 + 8 * (lane / 8 % 2)][k0 + 8 * (lane / 16)]);
#pragma unroll
    for (int n = 0; n < kTile / 8; n += 2) {
      uint32_t kb[4];
      ldmatrix_x4(kb, &kv[8 * n + lane % 8 + 8 * (lane / 16)][k0 + 8 * (lane / 8 % 2)]);
      mma_bf16_16816(logit[n], qa, kb[0], kb[1]);
      mma_bf16_16816(logit[n + 1], qa, kb[2], kb[3]);
    }
  }
  float(*mine)[kTile] = logits[warp];
#pragma unroll
  for (int n = 0; n < kTile / 8; ++n) {
    *reinterpret_cast<float2*>(&mine[g][8 * n + 2 * c]) = make_float2(logit[n][0], logit[n][1]);
    *reinterpret_cast<float2*>(&mine[g + 8][8 * n + 2 * c]) = make_float2(logit[n][2], logit[n][3]);
  }
  pair_barrier(head_row);
  const float(*other)[kTile] = logits[warp ^ kHeadRows];  // the pair's other half
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int n = 0; n < kTile / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = g + 8 * (e / 2), col = 8 * n + 2 * c + e % 2;
      const float sum = __fadd_rn(logit[n][e], other[r][col]);  // the same bits in both warps
      logit[n][e] = rows[col] >= 0 ? __fmul_rn(sum, scale) : -INFINITY;
      tile_max[e / 2] = fmaxf(tile_max[e / 2], logit[n][e]);
    }
  }
  // Online softmax: rescale what was summed to the new max.
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 1));
    tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], 2));
    const float new_max = fmaxf(w.running_max[i], tile_max[i]);
    const float rescale = exp2_from(w.running_max[i], new_max);
    w.running_max[i] = new_max;
    w.running_sum[i] = __fmul_rn(w.running_sum[i], rescale);
#pragma unroll
    for (int n = 0; n < kHalfDims / 8; ++n) {
      w.out[n][2 * i] = __fmul_rn(w.out[n][2 * i], rescale);
      w.out[n][2 * i + 1] = __fmul_rn(w.out[n][2 * i + 1], rescale);
    }
  }
#pragma unroll
  for (int n = 0; n < kTile / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      logit[n][e] = exp2_from(logit[n][e], w.running_max[e / 2]);  // 0 for a missing candidate
      w.running_sum[e / 2] = __fadd_rn(w.running_sum[e / 2], logit[n][e]);
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
    const __nv_bfloat16* v_rows = &kv[16 * k + lane % 8 + 8 * (lane / 8 % 2)][0];
#pragma unroll
    for (int n = 0; n < kHalfDims / 8; n += 2) {
      uint32_t vb[4];
      ldmatrix_x4_trans(vb, v_rows + half * kHalfDims + 8 * n + 8 * (lane / 16));
      mma_bf16_16816(w.out[n], pa, vb[0], vb[1]);
      mma_bf16_16816(w.out[n + 1], pa, vb[2], vb[3]);
    }
  }
}

// A warp's rows of query t out: with one run, normalised; with several, this run's partial rows
// and (max, sum) for the combine.
template <int kHeadRows>
__device__ __forceinline__ void write_rows(const AttentionArgs& a, const Runs& runs,
                                           const RopeFp8& rope, int run, int64_t t, int64_t h0,
                                           WarpRows& w) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int head_row = warp % kHeadRows, half = warp / kHeadRows;
  const int g = lane / 4, c = lane % 4;
  // The query's backward turns, one a rope pair, computed once for the block's lanes (in a loop
  // not unrolled, so the kernel keeps one copy of cosf/sinf and their slow path's frame).
  __shared__ Turn turns[kDims / 2];
  if (!runs.split && rope.wanted()) {
    for (int64_t p = threadIdx.x; p < (a.head_dim - rope.first_pair) / 2; p += blockDim.x) {
      turns[p] = turn_at(rope.positions[t], rope.inv_freq[p], -1.0f);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float sum = w.running_sum[i];
    sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 1));
    sum = __fadd_rn(sum, __shfl_xor_sync(0xffffffffu, sum, 2));
    const int64_t h = h0 + 16 * head_row + g + 8 * i;
    if (h >= a.n_heads) continue;
    const int64_t row = t * a.n_heads + h;
    if (runs.split) {
      const int64_t at = int64_t{run} * runs.n_rows + row;
      if (half == 0 && c == 0) runs.max_sum[at] = make_float2(w.running_max[i], sum);
#pragma unroll
      for (int n = 0; n < kHalfDims / 8; ++n) {
        const int d = half * kHalfDims + 8 * n + 2 * c;
        if (d < a.head_dim) {
          *reinterpret_cast<float2*>(runs.partial + at * kDims + d) =
              make_float2(w.out[n][2 * i], w.out[n][2 * i + 1]);
        }
      }
      continue;
    }
    // The only run: normalised here as the combine normalises one run.
    const float2 max_sum = make_float2(w.running_max[i], sum);
    const Normaliser norm = normaliser(sink_log2(a, h), 1, [&](int) { return max_sum; });
    const float weight = exp2_from(max_sum.x, norm.max_all);
    float* dst = a.out + row * a.head_dim;
#pragma unroll
    for (int n = 0; n < kHalfDims / 8; ++n) {
      const int d = half * kHalfDims + 8 * n + 2 * c;
      if (d < a.head_dim) {
        float2 v = make_float2(__fdiv_rn(add_run(0.0f, weight, w.out[n][2 * i]), norm.denom),
                               __fdiv_rn(add_run(0.0f, weight, w.out[n][2 * i + 1]), norm.denom));
        if (rope.wanted() && d >= rope.first_pair) {
          v = turned_back(v, turns[(d - rope.first_pair) / 2]);
        }
        *reinterpret_cast<float2*>(dst + d) = v;
        w.out[n][2 * i] = v.x;  // kept for the FP8 form below
        w.out[n][2 * i + 1] = v.y;
      }
    }
  }
  if (runs.split || !rope.wanted()) return;
  // The FP8 form of the rows just written: a head's group of 128 dims is 16 of a lane's n-tiles
  // and the group's four lanes (c), whose largest value meets by two shuffles. Every lane
  // shuffles; the lanes of heads past the last store nothing.
  constexpr int kGroups = kHalfDims / kFp8Group, kTilesAGroup = kFp8Group / 8;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float amax[kGroups] = {};
#pragma unroll
    for (int n = 0; n < kHalfDims / 8; ++n) {
      amax[n / kTilesAGroup] =
          fmaxf(amax[n / kTilesAGroup], fmaxf(fabsf(w.out[n][2 * i]), fabsf(w.out[n][2 * i + 1])));
    }
    const int64_t h = h0 + 16 * head_row + g + 8 * i;
    float scale[kGroups];
#pragma unroll
    for (int q = 0; q < kGroups; ++q) {
      scale[q] = fp8_activation_scale(fp8_group_amax<4>(h < a.n_heads ? amax[q] : 0.0f));
    }
    if (h >= a.n_heads) continue;
    const int64_t col = h * a.head_dim + half * kHalfDims;
#pragma unroll
    for (int n = 0; n < kHalfDims / 8; ++n) {
      const int d = half * kHalfDims + 8 * n + 2 * c;
      if (d >= a.head_dim) continue;  // whole groups: head dims are a multiple of 128 here
      if (n % kTilesAGroup == 0 && c == 0) {
        group_scale(rope, t, col + 8 * n) = scale[n / kTilesAGroup];
      }
      store_codes(rope, t, col + 8 * n + 2 * c, make_float2(w.out[n][2 * i], w.out[n][2 * i + 1]),
                  scale[n / kTilesAGroup]);
    }
  }
}

// What a block attends: query t's candidates [c_begin, c_end) for heads h0 … (the block's
// kHeads), in n_tiles tiles.
struct BlockWork {
  int64_t t, h0, c_begin, c_end, n_extra_visible;
  int n_tiles;
  __device__ int64_t tile_start(int tile) const { return c_begin + int64_t{tile} * kTile; }
};

// The tiles from f32 rows: each staged while the one before computes, then rounded into the
// operand tile.
template <int kHeadRows>
__device__ void attend_staged(const AttentionArgs& a, const BlockWork& b, float scale,
                              typename Block<kHeadRows>::StagedSmem& s, WarpRows& w) {
  using B = Block<kHeadRows>;
  if (b.n_tiles > 0) stage_tile<kHeadRows>(a, b.t, b.c_begin, b.c_end, b.n_extra_visible, s, 0);
  cp_async_commit();
  load_queries<kHeadRows>(a, b.t, b.h0, s);
  for (int tile = 0; tile < b.n_tiles; ++tile) {
    cp_async_wait<0>();
    __syncthreads();  // the tile staged; every warp done with the previous operand tile
    round_tile<B::kThreads>(s);
    __syncthreads();  // the operand tile written; the staging buffer free
    if (tile + 1 < b.n_tiles) {
      stage_tile<kHeadRows>(a, b.t, b.tile_start(tile + 1), b.c_end, b.n_extra_visible, s,
                            (tile + 1) % 2);
    }
    cp_async_commit();
    attend_tile<kHeadRows>(s.q, s.kv[0], s.rows[tile % 2], s.logits, scale, w);
  }
}

// The tiles from the bf16 copy: each copied into its operand tile kCopyStages − 1 tiles ahead,
// its listed entries loaded a tile before that.
template <int kHeadRows>
__device__ void attend_copied(const AttentionArgs& a, const CopiedRows& copied, const BlockWork& b,
                              float scale, typename Block<kHeadRows>::CopiedSmem& s, WarpRows& w) {
  const auto list = [&](int tile) {
    return list_tile<kHeadRows>(a, b.t, b.tile_start(tile), b.c_end, b.n_extra_visible);
  };
  for (int tile = 0; tile < kCopyStages - 1; ++tile) {
    if (tile < b.n_tiles) {
      stage_copied_tile<kHeadRows>(a, copied, b.t, b.tile_start(tile), list(tile), s, tile);
    }
    cp_async_commit();
  }
  Listed<kHeadRows> listed = list(kCopyStages - 1);
  load_queries<kHeadRows>(a, b.t, b.h0, s);
  for (int tile = 0; tile < b.n_tiles; ++tile) {
    cp_async_wait<kCopyStages - 2>();
    __syncthreads();  // the tile landed; every warp done with the tile whose buffer refills
    const int ahead = tile + kCopyStages - 1;
    if (ahead < b.n_tiles) {
      stage_copied_tile<kHeadRows>(a, copied, b.t, b.tile_start(ahead), listed, s,
                                   ahead % kCopyStages);
    }
    cp_async_commit();
    listed = list(ahead + 1);
    attend_tile<kHeadRows>(s.q, s.kv[tile % kCopyStages], s.rows[tile % kCopyStages], s.logits,
                           scale, w);
  }
}

template <int kHeadRows, bool kCopied>
__global__ void __launch_bounds__(Block<kHeadRows>::kThreads, 1)
    sparse_attention_bf16_kernel(AttentionArgs a, CopiedRows copied, RopeFp8 rope,
                                 int64_t head_blocks, Runs runs) {
  using B = Block<kHeadRows>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  moe::pdl_trigger();  // the combine may launch now; it waits for these runs
  const int run = static_cast<int>(blockIdx.x % runs.n_runs);
  const int64_t query_block = blockIdx.x / runs.n_runs;
  BlockWork b;
  b.t = query_block / head_blocks;
  b.h0 = query_block % head_blocks * B::kHeads;
  b.n_extra_visible = visible_extra(a, b.t);
  const int64_t n_candidates = a.window.n_candidates + a.extra.n_candidates;
  b.c_begin = int64_t{run} * runs.tiles_per_run * kTile;
  b.c_end = std::min(n_candidates, b.c_begin + int64_t{runs.tiles_per_run} * kTile);
  b.n_tiles = static_cast<int>((b.c_end - b.c_begin + kTile - 1) / kTile);

  const int g = threadIdx.x % 32 / 4, head_row = threadIdx.x / 32 % kHeadRows;
  const float scale = __fmul_rn(a.scale, kLog2e);  // logits in log2 units: exp2 below
  WarpRows w{};
  for (int i = 0; i < 2; ++i) {
    const int64_t h = b.h0 + 16 * head_row + g + 8 * i;
    w.running_max[i] = h < a.n_heads ? sink_log2(a, h) : 0.0f;  // the sink joins the max
  }
  if constexpr (kCopied) {
    attend_copied<kHeadRows>(a, copied, b, scale,
                             *reinterpret_cast<typename B::CopiedSmem*>(smem_raw), w);
  } else {
    attend_staged<kHeadRows>(a, b, scale, *reinterpret_cast<typename B::StagedSmem*>(smem_raw), w);
  }
  write_rows<kHeadRows>(a, runs, rope, run, b.t, b.h0, w);
}

// out[t, h] = Σ_r 2^(m_r − M) · partial_r / (Σ_r 2^(m_r − M) · l_r + 2^(sink − M)), M the
// largest of the runs' maxima (each began at the sink): a block per (t, h), a thread per 2 dims.
// A thread's first kCombineBatch partials are loaded before the runs' (max, sum) pairs come to
// shared memory, and the rest kCombineBatch at a time, so a row waits a few load latencies,
// not three a run. The runs add in run order, each its weight times its partial (add_run).
// Launched dependent on the attention kernel (device/pdl.cuh): it waits for the runs before it
// reads them.
constexpr int kCombineThreads = kDims / 2;
constexpr int kCombineBatch = 8;

// Runs [r0, r0 + kCombineBatch) of this thread's two dims (zeros past the last run).
__device__ __forceinline__ void load_partials(const Runs& runs, const float* partial, int r0,
                                              float2 (&p)[kCombineBatch]) {
#pragma unroll
  for (int k = 0; k < kCombineBatch; ++k) {
    p[k] = r0 + k < runs.n_runs
               ? *reinterpret_cast<const float2*>(partial + (r0 + k) * runs.n_rows * kDims)
               : make_float2(0.0f, 0.0f);
  }
}

__global__ void __launch_bounds__(kCombineThreads)
    combine_runs_kernel(AttentionArgs a, RopeFp8 rope, Runs runs) {
  extern __shared__ float2 smem_max_sum[];  // [runs]
  __shared__ float warp_amax[kCombineThreads / 32];
  const int64_t n_rows = runs.n_rows, row = blockIdx.x, t = row / a.n_heads, h = row % a.n_heads;
  const int64_t d = 2 * threadIdx.x;  // a.head_dim ≤ kDims = 2 · kCombineThreads
  const bool active = d < a.head_dim;
  const float* partial = runs.partial + row * kDims + d;  // run r's: + r · n_rows · kDims
  float2 p[kCombineBatch];
  moe::pdl_wait();  // the runs
  if (active) load_partials(runs, partial, 0, p);
  for (int r = threadIdx.x; r < runs.n_runs; r += blockDim.x) {
    smem_max_sum[r] = runs.max_sum[r * n_rows + row];
  }
  __syncthreads();
  const Normaliser norm =
      normaliser(sink_log2(a, h), runs.n_runs, [&](int r) { return smem_max_sum[r]; });
  if (!active && !rope.wanted()) return;
  float2 v = make_float2(0.0f, 0.0f);
  if (active) {
    float2 sum = make_float2(0.0f, 0.0f);
    for (int r0 = 0; r0 < runs.n_runs; r0 += kCombineBatch) {
      if (r0 > 0) load_partials(runs, partial, r0, p);
#pragma unroll
      for (int k = 0; k < kCombineBatch; ++k) {
        if (r0 + k >= runs.n_runs) break;
        const float weight = exp2_from(smem_max_sum[r0 + k].x, norm.max_all);
        sum.x = add_run(sum.x, weight, p[k].x);
        sum.y = add_run(sum.y, weight, p[k].y);
      }
    }
    v = make_float2(__fdiv_rn(sum.x, norm.denom), __fdiv_rn(sum.y, norm.denom));
    if (rope.wanted() && d >= rope.first_pair) {
      v = turned_back(v,
                      turn_at(rope.positions[t], rope.inv_freq[(d - rope.first_pair) / 2], -1.0f));
    }
    *reinterpret_cast<float2*>(a.out + row * a.head_dim + d) = v;
  }
  if (!rope.wanted()) return;
  // The FP8 form: a group of 128 dims is 64 threads, two warps, whose largest values meet in
  // shared memory (inactive threads, past the head dim, hold whole groups of zeros).
  const float amax = fp8_group_amax<32>(fmaxf(fabsf(v.x), fabsf(v.y)));
  if (threadIdx.x % 32 == 0) warp_amax[threadIdx.x / 32] = amax;
  __syncthreads();
  if (!active) return;
  const int pair = threadIdx.x / (kFp8Group / 2) * 2;  // the group's first warp
  const float scale = fp8_activation_scale(fmaxf(warp_amax[pair], warp_amax[pair + 1]));
  const int64_t col = h * a.head_dim + d;
  if (d % kFp8Group == 0) group_scale(rope, t, col) = scale;
  store_codes(rope, t, col, v, scale);
}

template <int kHeadRows, bool kCopied>
void allow_shared_memory() {
  allow_dynamic_smem(sparse_attention_bf16_kernel<kHeadRows, kCopied>,
                     static_cast<int>(kCopied ? sizeof(typename Block<kHeadRows>::CopiedSmem)
                                              : sizeof(typename Block<kHeadRows>::StagedSmem)));
}

// The attention kernel with kHeadRows head rows a block, over every (query, head block, run).
template <int kHeadRows>
void launch_attention(const AttentionArgs& a, const CopiedRows& copied, const RopeFp8& rope,
                      int64_t n_tokens, const Runs& runs) {
  using B = Block<kHeadRows>;
  const int64_t head_blocks = ceil_div(a.n_heads, int64_t{B::kHeads});
  const auto launch = [&](auto kernel, size_t smem) {
    kernel<<<static_cast<unsigned>(n_tokens * head_blocks * runs.n_runs), B::kThreads, smem,
             op_stream()>>>(a, copied, rope, head_blocks, runs);
  };
  if (copied.pitch > 0) {
    launch(sparse_attention_bf16_kernel<kHeadRows, true>, sizeof(typename B::CopiedSmem));
  } else {
    launch(sparse_attention_bf16_kernel<kHeadRows, false>, sizeof(typename B::StagedSmem));
  }
  check_launch();
}

// dst[r, d] = bf16(src[r, d]) (nearest even, round_tile's rounding) for d < head_dim, 0 up to
// pitch: four values a thread.
__global__ void round_rows_kernel(const float* src, int64_t n_rows, int64_t head_dim, int64_t pitch,
                                  __nv_bfloat16* dst) {
  const int64_t quads = n_rows * pitch / 4;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < quads;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = 4 * i / pitch, d = 4 * i % pitch;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (d < head_dim) v = *reinterpret_cast<const float4*>(src + r * head_dim + d);
    *reinterpret_cast<uint2*>(dst + 4 * i) = make_uint2(pack_bf16(v.x, v.y), pack_bf16(v.z, v.w));
  }
}

// Whether a call reads a bf16 copy of its rows: a shared source (not decode rows' per-row
// tables), read at least kCopyReadsPerRow times a row copied, and a copy within
// kAttentionCopyMaxBytes.
bool reads_a_copy(const AttentionArgs& a, int64_t n_tokens, int64_t pitch) {
  if (a.window.addresses != nullptr) return false;
  const int64_t rows = a.window.n_rows + a.extra.n_rows;
  const int64_t reads = n_tokens * (a.window.n_candidates + a.extra.n_candidates);
  return rows > 0 && reads >= kCopyReadsPerRow * rows &&
         rows * pitch * int64_t{sizeof(__nv_bfloat16)} <= kAttentionCopyMaxBytes;
}

// The call's rows rounded into `scratch` (window rows, then extra rows), launched on the op
// stream before the attention.
CopiedRows copy_rows(const AttentionArgs& a, int64_t pitch, __nv_bfloat16* window) {
  __nv_bfloat16* extra = window + a.window.n_rows * pitch;
  const auto round = [&](const CandidateSource& source, __nv_bfloat16* dst) {
    if (source.n_rows == 0) return;
    const int64_t quads = source.n_rows * pitch / 4;
    const unsigned blocks =
        static_cast<unsigned>(std::min<int64_t>(ceil_div(quads, kElementThreads), 8 * sm_count()));
    round_rows_kernel<<<blocks, kElementThreads, 0, op_stream()>>>(source.kv, source.n_rows,
                                                                   a.head_dim, pitch, dst);
    check_launch();
  };
  round(a.window, window);
  round(a.extra, extra);
  return {window, extra, pitch};
}

// Rows [begin, end) of a call's decode rows: every per-row operand's rows, the shared ones
// ([1, K] lists) as they are.
SparseAttentionParams decode_rows_of(const SparseAttentionParams& p, int64_t begin, int64_t end) {
  const int64_t n = p.q.size(0);
  const auto part = [&](const TensorView& v) {
    return v.data != nullptr && v.size(0) == n ? v.rows(begin, end) : v;
  };
  SparseAttentionParams rows = p;
  rows.q = p.q.rows(begin, end);
  rows.out = p.out.rows(begin, end);
  rows.indices = part(p.indices);
  rows.extra_indices = part(p.extra_indices);
  rows.extra_positions = part(p.extra_positions);
  rows.kv_addresses = part(p.kv_addresses);
  rows.extra_addresses = part(p.extra_addresses);
  rows.row_positions = part(p.row_positions);
  rows.rope_positions = part(p.rope_positions);
  if (p.out_fp8.values.data != nullptr) {
    rows.out_fp8 = {p.out_fp8.values.rows(begin, end), p.out_fp8.scales.rows(begin, end)};
  }
  return rows;
}

// A call's RopeFp8 (checked: kernels/fp8_operands.h), or none.
RopeFp8 rope_fp8_of(const SparseAttentionParams& p) {
  const AttentionFp8Out o = attention_fp8_out(p);
  if (!o.wanted) return {};
  return {
      o.rope.positions, o.rope.inv_freq, o.rope.head_dim - 2 * o.rope.n_pairs,
      Fp8Out{const_cast<uint8_t*>(o.out.values), const_cast<float*>(o.out.scales), o.out.n_cols}};
}

Status attend(const AttentionArgs& a, const RopeFp8& rope, int64_t n_tokens) {
  const int64_t n_candidates = a.window.n_candidates + a.extra.n_candidates;
  const int64_t n_tiles = std::max<int64_t>(1, (n_candidates + kTile - 1) / kTile);
  // Runs a query: one when the queries' 64-head blocks alone give every SM a block, else enough
  // to. Decode rows over their own caches always split into runs of kRowRunTiles, so that a
  // row's bits are those of its call alone whatever the batch (and whatever -1 columns the
  // batch's widest pick list adds: a run of none adds zeros).
  const int64_t blocks = n_tokens * ceil_div(a.n_heads, int64_t{16 * kMaxHeadRows});
  const int64_t wanted = std::min<int64_t>(n_tiles, (sm_count() + blocks - 1) / blocks);
  Runs runs;
  runs.split = a.window.addresses != nullptr || wanted > 1;
  runs.tiles_per_run = a.window.addresses != nullptr
                           ? kRowRunTiles
                           : static_cast<int>((n_tiles + wanted - 1) / wanted);
  runs.n_runs = static_cast<int>((n_tiles + runs.tiles_per_run - 1) / runs.tiles_per_run);
  const int64_t n_rows = n_tokens * a.n_heads;
  runs.n_rows = n_rows;
  DSV4_ASSIGN_OR_RETURN(const Scratch scratch,
                        Scratch::allocate(runs.split ? static_cast<size_t>(runs.n_runs * n_rows) *
                                                           (kDims * sizeof(float) + sizeof(float2))
                                                     : 0));
  if (runs.split) {
    runs.partial = scratch.as<float>();
    runs.max_sum = reinterpret_cast<float2*>(runs.partial + runs.n_runs * n_rows * kDims);
  }
  const int64_t pitch = (a.head_dim + 7) / 8 * 8;
  const bool copy = reads_a_copy(a, n_tokens, pitch);
  DSV4_ASSIGN_OR_RETURN(
      const Scratch copy_scratch,
      Scratch::allocate(copy ? static_cast<size_t>((a.window.n_rows + a.extra.n_rows) * pitch) *
                                   sizeof(__nv_bfloat16)
                             : 0));
  const CopiedRows copied =
      copy ? copy_rows(a, pitch, copy_scratch.as<__nv_bfloat16>()) : CopiedRows{};
  // Every block size's shared memory allowed at the op's first call (a prompt's, eager), not at
  // each size's own first launch, which may come in a decode step under graph capture.
  static const bool configured = [] {
    allow_shared_memory<1, false>();
    allow_shared_memory<2, false>();
    allow_shared_memory<kMaxHeadRows, false>();
    allow_shared_memory<1, true>();
    allow_shared_memory<2, true>();
    allow_shared_memory<kMaxHeadRows, true>();
    return true;
  }();
  (void)configured;
  // Head rows a block: for decode rows the fewest whose grid is one wave (an SM a block), else
  // (and for a prefill) all four.
  const auto fits = [&](int head_rows) {
    return n_tokens <= kDecodeRows &&
           n_tokens * ceil_div(a.n_heads, int64_t{16 * head_rows}) * runs.n_runs <= sm_count();
  };
  if (fits(1)) {
    launch_attention<1>(a, copied, rope, n_tokens, runs);
  } else if (fits(2)) {
    launch_attention<2>(a, copied, rope, n_tokens, runs);
  } else {
    launch_attention<kMaxHeadRows>(a, copied, rope, n_tokens, runs);
  }
  if (runs.split) {
    // Launched while the runs still compute (programmatic dependent launch): its blocks are
    // resident when the last run ends, so the step waits no launch gap between the two.
    moe::launch_pdl(combine_runs_kernel, dim3(static_cast<unsigned>(n_rows)), dim3(kCombineThreads),
                    runs.n_runs * sizeof(float2), op_stream(), a, rope, runs);
  }
  return ok_status();
}

}  // namespace

Status sparse_attention_bf16(const SparseAttentionParams& p) {
  const AttentionArgs a = attention_args(p);
  check_fast_attention_head_dim(a.head_dim);
  const int64_t n_tokens = p.q.size(0);
  if (n_tokens * a.n_heads == 0) return ok_status();
  // Decode rows whose runs would pass kAttentionRunsMaxBytes go in launches of fewer rows.
  if (a.window.addresses != nullptr) {
    const int64_t per_row =
        attention_runs_bytes_a_row(a.window.n_candidates + a.extra.n_candidates, a.n_heads);
    const int64_t rows = std::max<int64_t>(1, kAttentionRunsMaxBytes / per_row);
    if (rows < n_tokens) {
      for (int64_t begin = 0; begin < n_tokens; begin += rows) {
        const SparseAttentionParams part =
            decode_rows_of(p, begin, std::min(n_tokens, begin + rows));
        DSV4_RETURN_IF_ERROR(attend(attention_args(part), rope_fp8_of(part), part.q.size(0)));
      }
      return ok_status();
    }
  }
  return attend(a, rope_fp8_of(p), n_tokens);
}

}  // namespace dsv4::kernels::cuda

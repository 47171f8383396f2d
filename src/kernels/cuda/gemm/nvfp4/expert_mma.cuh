// The fused path's expert kernel: for a few tokens per expert (decode), a GEMM is a stream of
// weights, so the kernel is organised to read each touched expert's NVFP4 bytes exactly once
// with many loads in flight, and to do the arithmetic on tensor cores only because they make
// the per-byte instruction count small.
//
// Work split. A work unit is (active group, block of n_mtiles m-tiles of 16 weight rows); group
// E is the shared expert. A persistent block takes units b, b + gridDim.x, ...; the unit's
// n_mtiles × K/128 (m-tile, k-tile) items go round-robin to its 16 warps, at most 4 each.
// Weights stream through a two-stage shared-memory ring with cp.async: while the block decodes
// and multiplies unit u, the copy of unit u + gridDim.x is in flight (and L2 is asked for the
// one after), so HBM never waits for the arithmetic. Every lane copies and later reads only its
// own 16-byte slots, so the ring needs no barrier, only cp.async.wait_group. For each chunk of
// ≤ 8 tokens a warp runs m16n8k16 bf16 MMAs (weights as A, decoded in registers; tokens as B).
// Per-item partial sums meet in shared memory and are added in a fixed k-tile order:
// deterministic, no atomics.
//
// Lane (g, c) = (lane / 4, lane % 4) of an item (mt, kt) owns rows g and g+8 of the m-tile and
// K elements [kt·128 + 32c, +32): 16 packed bytes and 2 block scales per row, and the same 32
// elements of token g. MMA step j (0..7) takes 8-group j/2, pairs 2(j%2) and 2(j%2)+1 of the
// pair layout (pair_layout.cuh) as the fragment's k = (2c, 2c+1) and (2c+8, 2c+9).
//
// Dimension letters: E routed experts, N rows of one expert matrix, K its columns, F expert
// width, S grouped rows.
#pragma once

#include <cstdint>

#include "kernels/cuda/device/pair_layout.cuh"
#include "kernels/cuda/device/swiglu.cuh"

namespace dsv4::kernels::cuda::moe {

inline constexpr int kExpertWarps = 16;
inline constexpr int kExpertThreads = 32 * kExpertWarps;
inline constexpr int kItemsPerWarp = 4;
inline constexpr int kMaxItems = kExpertWarps * kItemsPerWarp;
inline constexpr int kKTile = 128;     // K elements per item
inline constexpr int kTokenChunk = 8;  // MMA n
inline constexpr int kStages = 2;      // weight ring: the unit computed and the next one

// One ring stage: every item's two 16-byte row slices per lane, [item][row lo / hi][lane], so a
// warp's 16-byte shared loads are consecutive (no bank conflicts).
using WeightStage = uint4[kMaxItems][2][32];
// Dynamic shared memory: the ring, then the per-item partial sums [item][lane][4].
inline constexpr int kExpertSmemBytes =
    kStages * static_cast<int>(sizeof(WeightStage)) + kMaxItems * 32 * 4 * 4;

struct ExpertParams {
  // Weights [E, N, K] with linear block scales, plus the shared expert [1, N, K] as group E.
  const uint8_t* packed;
  const uint8_t* scale;
  const float* global;
  const uint8_t* shared_packed;
  const uint8_t* shared_scale;
  const float* shared_global;
  int n_experts, n_rows, k;
  int n_mtiles;   // 16-row m-tiles per work unit
  int n_xblocks;  // work units per group: (rows of one matrix) / (16 · n_mtiles)
  // Activation rows: bf16 in the pair layout (W4A16) or NVFP4 with linear scales (W4A4).
  const uint16_t* act_bf16;   // [rows, K]
  const uint8_t* act_packed;  // [rows, K/2]
  const uint8_t* act_scale;   // [rows, K/16]
  const float* act_global;    // [1]
  const int* row_token;       // [S]: activation row of grouped row r, or nullptr for r itself
  // Groups.
  const int* offsets;  // [E+2]
  const int* active;   // [E+1], n_active at [E+1]
  // Epilogue. Gate-up (L1): m-tile rows 0..7 are gate rows, 8..15 the matching up rows, and the
  // output is act = swiglu [S, F]; down (L2): out [S, N].
  int ffn;
  float swiglu_limit;
  float* out_f32;      // L1 W4A4: act f32 [S, F]; L2: down f32 [S, N]
  uint16_t* out_bf16;  // L1 W4A16: act bf16 [S, F], pair layout
  // Fused combine (expert_stream.cu's down kernel at decode sizes; nullptr combine_y: the
  // combine kernel runs instead). The last warp to finish an m-tile's rows, counted in
  // mtile_rows_done (zeroed by the routing front), writes combine_y's 16 columns of it.
  float* combine_y;          // [T, N]
  const int* row_of;         // [T, K+1]
  const float* sel_weight;   // [T, K+1]
  int* mtile_rows_done;      // [N/16]
  int n_tokens, k_used;
};

struct ItemWeights {
  uint4 lo, hi;     // rows g and g+8: 32 E2M1 each
  uint32_t scales;  // block scales: lo0 lo1 hi0 hi1 (bytes 0..3)
};

// Weight rows of m-tile mt: (gate j, up F + j) pairs for L1, 16 consecutive rows for L2.
template <bool kGateUp>
__device__ __forceinline__ void mtile_rows(const ExpertParams& p, int xb, int mt, int g, int& lo,
                                           int& hi) {
  if constexpr (kGateUp) {
    lo = (xb * p.n_mtiles + mt) * 8 + g;
    hi = p.ffn + lo;
  } else {
    lo = (xb * p.n_mtiles + mt) * 16 + g;
    hi = lo + 8;
  }
}

// Byte offsets of lane `lane`'s 16 packed bytes of an item's two rows, and of their scales.
template <bool kGateUp>
__device__ __forceinline__ void item_offsets(const ExpertParams& p, int xb, int item, int lane,
                                             int64_t& lo_byte, int64_t& hi_byte, int64_t& lo_kb,
                                             int64_t& hi_kb) {
  const int n_ktiles = p.k / kKTile, mt = item / n_ktiles, kt = item % n_ktiles;
  const int g = lane / 4, c = lane % 4;
  int lo, hi;
  mtile_rows<kGateUp>(p, xb, mt, g, lo, hi);
  const int64_t row_bytes = p.k / 2, row_scales = p.k / 16;
  const int byte = kt * (kKTile / 2) + c * 16, kb = kt * (kKTile / 16) + c * 2;
  lo_byte = lo * row_bytes + byte, hi_byte = hi * row_bytes + byte;
  lo_kb = lo * row_scales + kb, hi_kb = hi * row_scales + kb;
}

// Starts the copy of the lane's 32 weight bytes of `item` into its slots of `stage` and returns
// the item's four block scales (an ordinary load, first used one unit later).
template <bool kGateUp>
__device__ __forceinline__ uint32_t issue_item(const ExpertParams& p, const uint8_t* packed,
                                               const uint8_t* scale, int xb, int item, int lane,
                                               WeightStage& stage) {
  int64_t lo, hi, lo_kb, hi_kb;
  item_offsets<kGateUp>(p, xb, item, lane, lo, hi, lo_kb, hi_kb);
  cp_async16(&stage[item][0][lane], packed + lo);
  cp_async16(&stage[item][1][lane], packed + hi);
  const uint32_t s_lo = *reinterpret_cast<const uint16_t*>(scale + lo_kb);
  const uint32_t s_hi = *reinterpret_cast<const uint16_t*>(scale + hi_kb);
  return s_lo | (s_hi << 16);
}

// The 32 activation elements of token row `row` for k-tile kt as 16 bf16x2 pairs
// (8-group q's pair p at index 4q + p); zeros when the lane has no token.
template <bool kNvfp4Act>
__device__ __forceinline__ void load_activation(const ExpertParams& p, int64_t row, bool valid,
                                                int kt, int c, uint32_t b[16]) {
  const int k0 = kt * kKTile + c * 32;
  if (!valid) {
#pragma unroll
    for (int i = 0; i < 16; ++i) b[i] = 0;
    return;
  }
  if constexpr (kNvfp4Act) {
    const uint4 q = *reinterpret_cast<const uint4*>(p.act_packed + row * (p.k / 2) + k0 / 2);
    const uint16_t s = *reinterpret_cast<const uint16_t*>(p.act_scale + row * (p.k / 16) + k0 / 16);
    const uint32_t s0 = scale_pair(s & 0xff), s1 = scale_pair(s >> 8);
    decode_word(q.x, s0, b + 0);
    decode_word(q.y, s0, b + 4);
    decode_word(q.z, s1, b + 8);
    decode_word(q.w, s1, b + 12);
  } else {
    const uint4* src = reinterpret_cast<const uint4*>(p.act_bf16 + row * p.k + k0);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint4 v = src[i];
      b[4 * i] = v.x, b[4 * i + 1] = v.y, b[4 * i + 2] = v.z, b[4 * i + 3] = v.w;
    }
  }
}

// acc += this item's 16 × 8 product: 8 MMA steps over its 128 K elements.
__device__ __forceinline__ void mma_item(const ItemWeights& w, const uint32_t b[16], float acc[4]) {
  const uint32_t lo_words[4] = {w.lo.x, w.lo.y, w.lo.z, w.lo.w};
  const uint32_t hi_words[4] = {w.hi.x, w.hi.y, w.hi.z, w.hi.w};
  const uint32_t s_lo[2] = {scale_pair(w.scales & 0xff), scale_pair((w.scales >> 8) & 0xff)};
  const uint32_t s_hi[2] = {scale_pair((w.scales >> 16) & 0xff), scale_pair(w.scales >> 24)};
#pragma unroll
  for (int q = 0; q < 4; ++q) {  // 8-group q = MMA steps 2q, 2q+1; block scale q / 2
    uint32_t lo[4], hi[4];
    decode_word(lo_words[q], s_lo[q / 2], lo);
    decode_word(hi_words[q], s_hi[q / 2], hi);
    const uint32_t a0[4] = {lo[0], hi[0], lo[1], hi[1]};
    const uint32_t a1[4] = {lo[2], hi[2], lo[3], hi[3]};
    mma_bf16_16816(acc, a0, b[4 * q], b[4 * q + 1]);
    mma_bf16_16816(acc, a1, b[4 * q + 2], b[4 * q + 3]);
  }
}

// Sums the items' partials of m-tile mt in k-tile order and writes the outputs of this chunk.
template <bool kGateUp>
__device__ __forceinline__ void epilogue(const ExpertParams& p, const float (*smem_partial)[32][4],
                                         float alpha, int xb, int row_base, int n_tok) {
  const int n_ktiles = p.k / kKTile;
  constexpr int kPerMtile = kGateUp ? 64 : 128;  // outputs of one m-tile and chunk
  for (int i = threadIdx.x; i < p.n_mtiles * kPerMtile; i += kExpertThreads) {
    const int mt = i / kPerMtile, e = i % kPerMtile;
    const int lane = kGateUp ? e / 2 : e / 4, r = kGateUp ? e % 2 : e % 4;
    const int g = lane / 4, tok = 2 * (lane % 4) + r % 2;
    if (tok >= n_tok) continue;
    // Four independent chains (k-tile kt mod 4) so the shared loads overlap; the order of the
    // additions is still fixed, so the result is the same bits on every run.
    const float(*partial)[32][4] = smem_partial + mt * n_ktiles;
    float sums[4] = {0.0f, 0.0f, 0.0f, 0.0f}, ups[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int kt = 0;
    for (; kt + 4 <= n_ktiles; kt += 4) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        sums[j] += partial[kt + j][lane][r];
        if constexpr (kGateUp) ups[j] += partial[kt + j][lane][r + 2];
      }
    }
    for (; kt < n_ktiles; ++kt) {
      sums[0] += partial[kt][lane][r];
      if constexpr (kGateUp) ups[0] += partial[kt][lane][r + 2];
    }
    const float sum = (sums[0] + sums[1]) + (sums[2] + sums[3]);
    const float sum_up = (ups[0] + ups[1]) + (ups[2] + ups[3]);
    int lo, hi;
    mtile_rows<kGateUp>(p, xb, mt, g, lo, hi);
    const int64_t row = row_base + tok;
    if constexpr (kGateUp) {
      const float act = swiglu(alpha * sum, alpha * sum_up, p.swiglu_limit);
      if (p.out_bf16) {
        p.out_bf16[row * p.ffn + pair_layout_index(lo)] = float_to_bf16(act);
      } else {
        p.out_f32[row * p.ffn + lo] = act;
      }
    } else {
      p.out_f32[row * p.n_rows + (r < 2 ? lo : hi)] = alpha * sum;
    }
  }
}

template <bool kGateUp>
__device__ __forceinline__ const uint8_t* group_bytes(const ExpertParams& p, int group,
                                                      bool scales) {
  const int64_t matrix_bytes = int64_t{p.n_rows} * p.k / 2;
  if (group == p.n_experts) return scales ? p.shared_scale : p.shared_packed;
  return scales ? p.scale + group * (matrix_bytes / 8) : p.packed + group * matrix_bytes;
}

// Work unit u = (active group u / n_xblocks, m-tile block u % n_xblocks). What the kernel needs
// of a unit besides its weights; loaded one unit ahead, so no dependent load chain (active →
// offsets, global scale) stalls the warps between units.
struct UnitInfo {
  int group, xb, row_begin, row_end;
  float global;  // the group's weight global scale
};

__device__ __forceinline__ UnitInfo load_unit_info(const ExpertParams& p, int unit, int group) {
  return UnitInfo{group, unit % p.n_xblocks, p.offsets[group], p.offsets[group + 1],
                  group == p.n_experts ? *p.shared_global : p.global[group]};
}

// Issues the lane's copies of a unit's weights into `stage` and loads its block scales.
template <bool kGateUp>
__device__ __forceinline__ void issue_unit(const ExpertParams& p, int group, int xb, int n_items,
                                           int warp, int lane, WeightStage& stage,
                                           uint32_t scales[kItemsPerWarp]) {
  const uint8_t* packed = group_bytes<kGateUp>(p, group, false);
  const uint8_t* scale = group_bytes<kGateUp>(p, group, true);
#pragma unroll
  for (int i = 0; i < kItemsPerWarp; ++i) {
    const int item = warp + kExpertWarps * i;
    if (item < n_items) scales[i] = issue_item<kGateUp>(p, packed, scale, xb, item, lane, stage);
  }
}

// Asks L2 for a unit's weight lines (one per 32-byte sector of the lane group's 64 bytes).
template <bool kGateUp>
__device__ __forceinline__ void prefetch_unit(const ExpertParams& p, int group, int xb, int n_items,
                                              int warp, int lane) {
  const uint8_t* packed = group_bytes<kGateUp>(p, group, false);
#pragma unroll
  for (int i = 0; i < kItemsPerWarp; ++i) {
    const int item = warp + kExpertWarps * i;
    int64_t lo, hi, lo_kb, hi_kb;
    item_offsets<kGateUp>(p, xb, item, lane, lo, hi, lo_kb, hi_kb);
    if (item < n_items && lane % 2 == 0) prefetch_l2(packed + lo), prefetch_l2(packed + hi);
  }
}

// The group of unit u, or -1 past the last unit.
__device__ __forceinline__ int unit_group(const ExpertParams& p, int unit, int n_units) {
  return unit < n_units ? p.active[unit / p.n_xblocks] : -1;
}

template <bool kGateUp, bool kNvfp4Act>
__global__ void __launch_bounds__(kExpertThreads, 1) expert_mma_kernel(ExpertParams p) {
  static_assert(kDecodeScaleLog2 == 10, "alpha below undoes 2^-10 per decoded operand");
  extern __shared__ uint4 smem[];
  WeightStage* ring = reinterpret_cast<WeightStage*>(smem);
  float(*smem_partial)[32][4] = reinterpret_cast<float(*)[32][4]>(ring + kStages);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n_items = p.n_mtiles * (p.k / kKTile);
  // The shared expert, when there is one, is the last active group.
  const int n_units = (p.active[p.n_experts + 1] - (p.shared_packed ? 0 : 1)) * p.n_xblocks;
  const int stride = gridDim.x;
  const float act_scale = kNvfp4Act ? *p.act_global : 1.0f;
  uint32_t scales[kItemsPerWarp] = {}, next_scales[kItemsPerWarp] = {};
  int unit = blockIdx.x;
  const int group = unit_group(p, unit, n_units);
  if (group < 0) return;  // more blocks than units
  UnitInfo cur = load_unit_info(p, unit, group);
  issue_unit<kGateUp>(p, group, cur.xb, n_items, warp, lane, ring[0], scales);
  cp_async_commit();
  int next_group = unit_group(p, unit + stride, n_units);
  for (int stage = 0; unit < n_units; unit += stride, stage ^= 1) {
    // Unit u + stride: weights into the other stage, its scalars into registers. Unit
    // u + 2·stride: its group now (used next iteration) and its lines into L2 after the MMAs.
    const int next = unit + stride;
    UnitInfo next_info{};
    if (next_group >= 0) {
      next_info = load_unit_info(p, next, next_group);
      issue_unit<kGateUp>(p, next_group, next_info.xb, n_items, warp, lane, ring[stage ^ 1],
                          next_scales);
    }
    cp_async_commit();  // possibly empty: wait_group below always counts one group per unit
    const int after_group = unit_group(p, next + stride, n_units);
    cp_async_wait<1>();  // this unit's copies (this lane's own slots) have landed

    float alpha = cur.global;
    if constexpr (kNvfp4Act) alpha = __fmul_rn(act_scale, alpha);
    alpha = __fmul_rn(alpha, kNvfp4Act ? 0x1p20f : 0x1p10f);
    for (int base = cur.row_begin; base < cur.row_end; base += kTokenChunk) {
      const int n_tok = min(kTokenChunk, cur.row_end - base);
      const int g = lane / 4;
      const bool valid = g < n_tok;
      const int64_t act_row = !valid ? 0 : p.row_token ? p.row_token[base + g] : base + g;
      uint32_t b[kItemsPerWarp][16];  // all loads in flight before the first MMA
#pragma unroll
      for (int i = 0; i < kItemsPerWarp; ++i) {
        const int item = warp + kExpertWarps * i;
        if (item < n_items) {
          load_activation<kNvfp4Act>(p, act_row, valid, item % (p.k / kKTile), lane % 4, b[i]);
        }
      }
#pragma unroll
      for (int i = 0; i < kItemsPerWarp; ++i) {
        const int item = warp + kExpertWarps * i;
        if (item >= n_items) break;
        const ItemWeights w{ring[stage][item][0][lane], ring[stage][item][1][lane], scales[i]};
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        mma_item(w, b[i], acc);
#pragma unroll
        for (int r = 0; r < 4; ++r) smem_partial[item][lane][r] = acc[r];
      }
      __syncthreads();
      epilogue<kGateUp>(p, smem_partial, alpha, cur.xb, base, n_tok);
      __syncthreads();
    }
    if (after_group >= 0) {
      prefetch_unit<kGateUp>(p, after_group, (next + stride) % p.n_xblocks, n_items, warp, lane);
    }
#pragma unroll
    for (int i = 0; i < kItemsPerWarp; ++i) scales[i] = next_scales[i];
    cur = next_info;
    next_group = after_group;
  }
  cp_async_wait<0>();  // no copy outlives the block
}

// Picks n_mtiles (the most 16-row m-tiles per unit that the 64 items and N allow; fills it and
// n_xblocks into p) and launches a persistent grid for at most n_slots_max active groups.
// expert_mma.cu.
void launch_expert(ExpertParams p, bool gate_up, bool nvfp4_act, int n_slots_max,
                   cudaStream_t stream);

// The W4A16 decode kernel (expert_stream.cu): a warp per (group, 16-row m-tile, pass of
// ≤ 32 rows) over all of K. Reads only act_bf16 / out_bf16 (L1) / out_f32 (L2) of the
// activation and output fields; max_group_rows bounds the rows of any group (T).
void launch_expert_stream(const ExpertParams& p, bool gate_up, int n_slots_max, int max_group_rows,
                          cudaStream_t stream);

}  // namespace dsv4::kernels::cuda::moe

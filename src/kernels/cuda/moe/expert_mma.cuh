// The fused path's expert kernel: for a few tokens per expert (decode), a GEMM is a stream of
// weights, so the kernel is organised to read each touched expert's NVFP4 bytes exactly once
// with many loads in flight, and to do the arithmetic on tensor cores only because they make
// the per-byte instruction count small.
//
// Work split. Block (x, y): m-tiles of 16 weight rows (x) of the active groups y, y + gridDim.y,
// ... (group E is the shared expert). The block's n_mtiles × K/128 (m-tile, k-tile) items go
// round-robin to its 16 warps, at most 4 each: a warp loads all its items' weights (16 B per
// row per lane) up front, keeps them packed in registers across the group's token chunks, and
// for each chunk of ≤ 8 tokens runs m16n8k16 bf16 MMAs (weights as A, decoded in registers;
// tokens as B). Per-item partial sums meet in shared memory and are added in k-tile order:
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

#include "kernels/cuda/moe/pair_layout.cuh"

namespace dsv4::kernels::cuda::moe {

inline constexpr int kExpertWarps = 16;
inline constexpr int kExpertThreads = 32 * kExpertWarps;
inline constexpr int kItemsPerWarp = 4;
inline constexpr int kMaxItems = kExpertWarps * kItemsPerWarp;
inline constexpr int kKTile = 128;     // K elements per item
inline constexpr int kTokenChunk = 8;  // MMA n

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

template <bool kGateUp>
__device__ __forceinline__ ItemWeights load_item(const ExpertParams& p, const uint8_t* packed,
                                                 const uint8_t* scale, int xb, int item, int lane) {
  int64_t lo, hi, lo_kb, hi_kb;
  item_offsets<kGateUp>(p, xb, item, lane, lo, hi, lo_kb, hi_kb);
  ItemWeights w;
  w.lo = load_streaming(packed + lo);
  w.hi = load_streaming(packed + hi);
  const uint32_t s_lo = *reinterpret_cast<const uint16_t*>(scale + lo_kb);
  const uint32_t s_hi = *reinterpret_cast<const uint16_t*>(scale + hi_kb);
  w.scales = s_lo | (s_hi << 16);
  return w;
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

__device__ __forceinline__ float swiglu(float gate, float up, float limit) {
  if (limit > 0.0f) {
    gate = fminf(gate, limit);
    up = fminf(fmaxf(up, -limit), limit);
  }
  return __fmul_rn(__fdiv_rn(gate, __fadd_rn(1.0f, expf(-gate))), up);
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
    float sum = 0.0f, sum_up = 0.0f;
    for (int kt = 0; kt < n_ktiles; ++kt) {
      sum += smem_partial[mt * n_ktiles + kt][lane][r];
      if constexpr (kGateUp) sum_up += smem_partial[mt * n_ktiles + kt][lane][r + 2];
    }
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

// Work unit u = (active group u / n_xblocks, m-tile block u % n_xblocks); block b takes units
// b, b + gridDim.x, ... and asks L2 for its next unit's weights before computing this one, so
// the HBM stream never waits for the tensor cores.
template <bool kGateUp>
__device__ __forceinline__ const uint8_t* group_bytes(const ExpertParams& p, int group,
                                                      bool scales) {
  const int64_t matrix_bytes = int64_t{p.n_rows} * p.k / 2;
  if (group == p.n_experts) return scales ? p.shared_scale : p.shared_packed;
  return scales ? p.scale + group * (matrix_bytes / 8) : p.packed + group * matrix_bytes;
}

template <bool kGateUp, bool kNvfp4Act>
__global__ void __launch_bounds__(kExpertThreads, 1) expert_mma_kernel(ExpertParams p) {
  static_assert(kDecodeScaleLog2 == 10, "alpha below undoes 2^-10 per decoded operand");
  __shared__ float smem_partial[kMaxItems][32][4];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n_items = p.n_mtiles * (p.k / kKTile);
  const int n_units = p.active[p.n_experts + 1] * p.n_xblocks;
  for (int unit = blockIdx.x; unit < n_units; unit += gridDim.x) {
    const int group = p.active[unit / p.n_xblocks], xb = unit % p.n_xblocks;
    const uint8_t* packed = group_bytes<kGateUp>(p, group, false);
    const uint8_t* scale = group_bytes<kGateUp>(p, group, true);
    ItemWeights w[kItemsPerWarp];
#pragma unroll
    for (int i = 0; i < kItemsPerWarp; ++i) {
      const int item = warp + kExpertWarps * i;
      if (item < n_items) w[i] = load_item<kGateUp>(p, packed, scale, xb, item, lane);
    }
    if (const int next = unit + gridDim.x; next < n_units) {
      const uint8_t* next_packed = group_bytes<kGateUp>(p, p.active[next / p.n_xblocks], false);
#pragma unroll
      for (int i = 0; i < kItemsPerWarp; ++i) {
        const int item = warp + kExpertWarps * i;
        int64_t lo, hi, lo_kb, hi_kb;
        item_offsets<kGateUp>(p, next % p.n_xblocks, item, lane, lo, hi, lo_kb, hi_kb);
        if (item < n_items && lane % 2 == 0)
          prefetch_l2(next_packed + lo), prefetch_l2(next_packed + hi);
      }
    }
    float alpha = group == p.n_experts ? *p.shared_global : p.global[group];
    if constexpr (kNvfp4Act) alpha = __fmul_rn(*p.act_global, alpha);
    alpha = __fmul_rn(alpha, kNvfp4Act ? 0x1p20f : 0x1p10f);

    const int row_begin = p.offsets[group], row_end = p.offsets[group + 1];
    for (int base = row_begin; base < row_end; base += kTokenChunk) {
      const int n_tok = min(kTokenChunk, row_end - base);
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
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        mma_item(w[i], b[i], acc);
#pragma unroll
        for (int r = 0; r < 4; ++r) smem_partial[item][lane][r] = acc[r];
      }
      __syncthreads();
      epilogue<kGateUp>(p, smem_partial, alpha, xb, base, n_tok);
      __syncthreads();
    }
  }
}

// Picks n_mtiles (the most 16-row m-tiles per unit that the 64 items and N allow; fills it and
// n_xblocks into p) and launches a persistent grid for at most n_slots_max active groups.
// expert_mma.cu.
void launch_expert(ExpertParams p, bool gate_up, bool nvfp4_act, int n_slots_max,
                   cudaStream_t stream);

}  // namespace dsv4::kernels::cuda::moe

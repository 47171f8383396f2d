// nvfp4_ws_gemm_sm90: the warp-specialised large-M NVFP4 GEMM (README.md, "Large M").
//
// Swap-AB: the CTA computes Dᵀ[128 weight rows, kBM tokens] so the weights are wgmma's operand A,
// which may come from registers. Each consumer thread then decodes the few weights its own A
// fragment holds (8 per k16) straight from the raw NVFP4 bytes in shared memory into
// registers: the decoded weights never touch shared memory, no barrier separates decode from
// wgmma, and the decode of K step kt+1 runs while the tensor cores work on step kt.
//
//   warpgroup 0 (producer, 88 or 120 registers): the tokens (bf16, 128-byte swizzle, the
//     layout wgmma's B descriptor reads) by one TMA box per stage (cp.async where A's
//     address forbids a tensor map) and the raw weight rows by cp.async into a kStages-deep
//     ring; completion is signalled on the slot's `full` mbarrier (the TMA's complete_tx and
//     cp.async.mbarrier.arrive).
//   warpgroups 1, 2 (consumers, 208 or 192 registers): 64 weight rows each; per K step wait
//     `full`, decode 4 k16 fragments, issue 4 × wgmma m64 n kBM k16 (A registers, B shared),
//     wait for the previous step's wgmma, release its slot on `empty`.
//
// Dimension letters: T tokens (rows of A and D), N output features (weight rows), K input
// features (Kp padded), G groups.
#pragma once

#include <cuda.h>  // CUtensorMap (a type only: nothing links libcuda)
#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/cuda/gemm/nvfp4/config.h"
#include "kernels/cuda/device/nvfp4_decode.cuh"
#include "kernels/cuda/gemm/nvfp4/params.h"
#include "kernels/cuda/device/sm90_ptx.cuh"
#include "kernels/cuda/gemm/nvfp4/tile_table.cuh"
#include "kernels/cuda/device/swiglu.cuh"

namespace dsv4::kernels::cuda::sm90 {

template <int kBM>
struct WsSmem {
  static constexpr int kTokenSlot = kBM * kTileK * 2;        // [kBM][64] bf16, 128B-swizzled
  static constexpr int kRawSlot = kWsRows * kRawRowBytes;    // [128][48] u8: codes, scales, pad
  // A narrow tile's stage is mostly weights (6 of 10 KB at 32 tokens), so its ring may be deeper;
  // with two CTAs an SM sharing the budget it holds 10 stages (32 tokens) or 7 (64).
  static constexpr int kMaxStages = kBM < 128 ? 12 : 8;
  static constexpr int kBudget = kWsSmemBudget / ws_ctas_per_sm(kBM);  // the SM's CTAs share it
  static constexpr int kStages = kBudget / (kTokenSlot + kRawSlot) < kMaxStages
                                     ? kBudget / (kTokenSlot + kRawSlot)
                                     : kMaxStages;
  static constexpr int kTokens = kStages * kTokenSlot;
  static constexpr int kRaw = kStages * kRawSlot;
  static constexpr int kBarriers = 2 * kStages * 8;          // full[kStages], empty[kStages]
  static constexpr int kBytes = kTokens + kRaw + kBarriers + kSmemTable + kSmemAlign;
  static_assert(kStages >= 3, "the ring needs depth");
};

// Tile t of the persistent walk -> (group, tokens, weight rows). Within a group, token tiles are
// walked kWsPanel at a time, weight-row blocks inside a panel: the CTAs running at once share
// a few token tiles and a band of weights, both L2-resident.
template <int kBM>
__device__ __forceinline__ TileCoord ws_tile(const int* s_offsets, const int* s_prefix,
                                             int n_groups, int n_tiles_n, int t) {
  const int g = find_group(s_prefix, n_groups, t);
  const int rows = s_offsets[g + 1] - s_offsets[g];
  const int m_tiles = (rows + kBM - 1) / kBM, local = t - s_prefix[g];
  const int panel = local / (kWsPanel * n_tiles_n), in_panel = local - panel * kWsPanel * n_tiles_n;
  const int width = min(kWsPanel, m_tiles - panel * kWsPanel);
  TileCoord tile;
  tile.group = g;
  tile.row0 = s_offsets[g] + (panel * kWsPanel + in_panel % width) * kBM;
  tile.n_rows_tile = min(kBM, s_offsets[g + 1] - tile.row0);
  tile.col0 = (in_panel / width) * kWsRows;
  return tile;
}

// ---- producer: one warpgroup, every thread a share of each stage's cp.async ----
// Producer thread t's share of a tile's raw weights, resolved once per tile so that a K step
// costs three cp.async and their address adds (recomputing the rows and parts every step costs
// the producer ~210 instructions a K step and leaves the consumers' `full` wait not ready on
// 88 % of the steps, ncu): the code half t % 2 of rows t / 2 and t / 2 + 64 (a lane pair
// reads one row's 32 contiguous bytes), and the 4 scale bytes of the first row for even t,
// the second for odd t.
struct WsWeightShare {
  const uint8_t* codes[2];
  const uint8_t* scales;
  uint32_t codes_dst[2], scales_dst;  // byte offsets in a raw slot
  bool codes_ok[2], scales_ok;
};

__device__ __forceinline__ WsWeightShare ws_weight_share(const Nvfp4GemmParams& p,
                                                         const TileCoord& tile, int t) {
  const int half = t % 2;
  WsWeightShare share;
  for (int i = 0; i < 2; ++i) {
    const int row = t / 2 + 64 * i, n_row = tile_weight_row(p, tile.col0, row);
    const int64_t weight_row = (int64_t)tile.group * p.n + (n_row >= 0 ? n_row : 0);
    share.codes[i] = p.b_packed + weight_row * (p.kp / 2) + half * 16;
    share.codes_dst[i] = row * kRawRowBytes + half * 16;
    share.codes_ok[i] = n_row >= 0;
    if (i == half) {
      share.scales = p.b_scale + weight_row * (p.kp / 16);
      share.scales_dst = row * kRawRowBytes + 32;
      share.scales_ok = n_row >= 0;
    }
  }
  return share;
}

// With p.a_tma, thread 0 instead loads the whole token tile with one bulk tensor copy (the
// tensor map's box is [kBM rows, 64 columns] in the same 128-byte swizzle, zero-filled past T
// and K; rows of the next group inside the box reach only outputs that are never stored).
template <int kBM>
__device__ __forceinline__ void ws_produce(const Nvfp4GemmParams& p, const void* a_map,
                                           const int* s_offsets, const int* s_prefix,
                                           int n_groups, int n_tiles_n, uint8_t* smem_tokens,
                                           uint8_t* smem_raw, uint64_t* full, uint64_t* empty) {
  using Smem = WsSmem<kBM>;
  const int t = threadIdx.x;  // 0..127
  const int n_tiles = s_prefix[n_groups], n_steps = p.kp / kTileK;
  const int chunk = t % 8, row_first = t / 8;  // tokens: rows row_first + 16 i, chunk fixed
  uint32_t it = 0;
  for (int tile_index = blockIdx.x; tile_index < n_tiles; tile_index += gridDim.x) {
    const TileCoord tile = ws_tile<kBM>(s_offsets, s_prefix, n_groups, n_tiles_n, tile_index);
    const uint16_t* a_first = p.a + (int64_t)(tile.row0 + row_first) * p.lda + chunk * 8;
    const WsWeightShare weights = ws_weight_share(p, tile, t);
    for (int kt = 0; kt < n_steps; ++kt, ++it) {
      const int slot = it % Smem::kStages;
      mbar_wait(&empty[slot], ((it / Smem::kStages) & 1) ^ 1);
      uint8_t* tokens = smem_tokens + slot * Smem::kTokenSlot;
      if (p.a_tma) {
        if (t == 0) {
          mbar_arrive_expect_tx(&full[slot], Smem::kTokenSlot);
          tma_load_2d(tokens, a_map, &full[slot], kt * kTileK, tile.row0);
        }
      } else {
        const bool col_ok = kt * kTileK + chunk * 8 < p.k;
#pragma unroll
        for (int i = 0; i < kBM / 16; ++i) {
          const int row = row_first + 16 * i;
          const bool valid = col_ok && row < tile.n_rows_tile;
          const uint16_t* src = valid ? a_first + (int64_t)(16 * i) * p.lda + kt * kTileK : p.a;
          cp_async16(tokens + swizzle128(row, chunk), src, valid);
        }
      }
      uint8_t* raw = smem_raw + slot * Smem::kRawSlot;
      cp_async16(raw + weights.codes_dst[0], weights.codes[0] + kt * 32, weights.codes_ok[0]);
      cp_async16(raw + weights.codes_dst[1], weights.codes[1] + kt * 32, weights.codes_ok[1]);
      cp_async4(raw + weights.scales_dst, weights.scales + kt * 4, weights.scales_ok);
      cp_async_mbar_arrive(&full[slot]);
    }
  }
  cp_async_wait_all();
}

// ---- consumer: one K step of this thread's A fragments ----
// Thread (warp w, lane l) of consumer warpgroup c holds weight rows r = 64 c + 16 w + l/4 and
// r + 8, K columns 2 (l%4) + {0, 1} and + 8 of each k16: byte l%4 of each 4-byte word of the
// two rows' codes (low nibble first = the lower K). frag[4 kk + m] is wgmma's a_m of k16 kk.
//
// The raw bytes of a step (both rows' 32 code bytes and 4 scale bytes) are loaded into
// registers one K step before they are decoded, so neither the `full` wait nor the shared-memory
// latency sits between a wgmma's retirement and the decode that the next wgmma waits for.
struct WsRaw {
  uint4 a0, a1, b0, b1;  // codes of rows r and r + 8
  uint32_t s0, s1;       // their four block scales
};

__device__ __forceinline__ void ws_load_raw(const uint8_t* raw_slot, int row, WsRaw& raw) {
  const uint8_t* r0 = raw_slot + row * kRawRowBytes;
  const uint8_t* r1 = r0 + 8 * kRawRowBytes;
  raw.a0 = *reinterpret_cast<const uint4*>(r0);
  raw.a1 = *reinterpret_cast<const uint4*>(r0 + 16);
  raw.b0 = *reinterpret_cast<const uint4*>(r1);
  raw.b1 = *reinterpret_cast<const uint4*>(r1 + 16);
  raw.s0 = *reinterpret_cast<const uint32_t*>(r0 + 32);
  raw.s1 = *reinterpret_cast<const uint32_t*>(r1 + 32);
}

__device__ __forceinline__ void ws_decode(const WsRaw& raw, uint32_t selector,
                                          uint32_t (&frag)[16]) {
  const uint32_t w0[8] = {raw.a0.x, raw.a0.y, raw.a0.z, raw.a0.w,
                          raw.a1.x, raw.a1.y, raw.a1.z, raw.a1.w};
  const uint32_t w1[8] = {raw.b0.x, raw.b0.y, raw.b0.z, raw.b0.w,
                          raw.b1.x, raw.b1.y, raw.b1.z, raw.b1.w};
  const uint32_t s0 = raw.s0, s1 = raw.s1;
  const uint32_t scale0[4] = {ue4m3_byte_to_bf16x2<0>(s0), ue4m3_byte_to_bf16x2<1>(s0),
                              ue4m3_byte_to_bf16x2<2>(s0), ue4m3_byte_to_bf16x2<3>(s0)};
  const uint32_t scale1[4] = {ue4m3_byte_to_bf16x2<0>(s1), ue4m3_byte_to_bf16x2<1>(s1),
                              ue4m3_byte_to_bf16x2<2>(s1), ue4m3_byte_to_bf16x2<3>(s1)};
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    // Low 16 bits: [row r byte, row r+8 byte] -> codes (r, 2t), (r, 2t+1), (r+8, 2t), (r+8, 2t+1).
    const uint32_t low = prmt(w0[2 * kk], w1[2 * kk], selector);
    const uint32_t high = prmt(w0[2 * kk + 1], w1[2 * kk + 1], selector);
    decode4(low, scale0[kk], scale1[kk], &frag[4 * kk]);
    decode4(high, scale0[kk], scale1[kk], &frag[4 * kk + 2]);
  }
}

// 4 × wgmma over one K step: this warpgroup's 64 weight rows × kBM tokens.
template <int kBM>
__device__ __forceinline__ void ws_mma(const uint32_t (&frag)[16], const uint8_t* tokens,
                                       bool first, float (&acc)[kBM / 2]) {
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kTileK / 16; ++kk) {
    wgmma_m64k16_rs<kBM>(acc, &frag[4 * kk], smem_descriptor(tokens + kk * 32),
                         (first && kk == 0) ? 0 : 1);
  }
  wgmma_commit();
}

// alpha of the tile's group: B's decode scale, times the staged A's (W4A4).
__device__ __forceinline__ float tile_alpha(const Nvfp4GemmParams& p, const TileCoord& tile) {
  return p.a_global != nullptr ? p.a_global[0] * p.b_global[tile.group] : p.b_global[tile.group];
}

// D[token, n] = alpha · acc. Thread (warp w, lane l) holds weight rows n = 16 w + l/4 (+8) and
// token pairs 8 j + 2 (l%4) + {0, 1}; lanes l and l^4 swap one value so that each stores two
// adjacent n of one token.
template <int kBM, bool kOutBf16>
__device__ __forceinline__ void ws_store(const Nvfp4GemmParams& p, const TileCoord& tile,
                                         int row, float (&acc)[kBM / 2]) {
  const float alpha = tile_alpha(p, tile);
  const int lane = threadIdx.x % 32;
  const bool even = (lane / 4) % 2 == 0;
  const bool pairs = p.ldd % 2 == 0;
#pragma unroll
  for (int j = 0; j < kBM / 8; ++j) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float v0 = alpha * acc[4 * j + 2 * half], v1 = alpha * acc[4 * j + 2 * half + 1];
      const float other = __shfl_xor_sync(0xffffffffu, even ? v1 : v0, 4);
      const int n = tile.col0 + row + 8 * half;  // this thread's weight row
      const int token = 8 * j + 2 * (lane % 4);  // and its first token
      if (pairs) {
        // even lane: (token, n..n+1) = v0, other; odd lane: (token+1, n-1..n) = other, v1.
        const int my_token = even ? token : token + 1, my_n = even ? n : n - 1;
        if (my_token >= tile.n_rows_tile || my_n >= p.n) continue;
        const float x = even ? v0 : other, y = even ? other : v1;
        const int64_t offset = (int64_t)(tile.row0 + my_token) * p.ldd + my_n;
        const bool both = my_n + 1 < p.n;
        if constexpr (kOutBf16) {
          __nv_bfloat16* d = static_cast<__nv_bfloat16*>(p.d) + offset;
          if (both) {
            *reinterpret_cast<__nv_bfloat162*>(d) = __floats2bfloat162_rn(x, y);
          } else {
            d[0] = __float2bfloat16_rn(x);
          }
        } else {
          float* d = static_cast<float*>(p.d) + offset;
          if (both) {
            *reinterpret_cast<float2*>(d) = make_float2(x, y);
          } else {
            d[0] = x;
          }
        }
      } else {
        if (n >= p.n) continue;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          if (token + e >= tile.n_rows_tile) continue;
          const int64_t offset = (int64_t)(tile.row0 + token + e) * p.ldd + n;
          const float v = e == 0 ? v0 : v1;
          if constexpr (kOutBf16) {
            static_cast<__nv_bfloat16*>(p.d)[offset] = __float2bfloat16_rn(v);
          } else {
            static_cast<float*>(p.d)[offset] = v;
          }
        }
      }
    }
  }
}

// The SwiGLU epilogue (p.swiglu_ffn = F): this thread's rows are the gate and up of output
// column j (tile_weight_row), so D[token, j] = swiglu(alpha · gate, alpha · up) needs no exchange.
template <int kBM, bool kOutBf16>
__device__ __forceinline__ void ws_store_swiglu(const Nvfp4GemmParams& p, const TileCoord& tile,
                                                int row, float (&acc)[kBM / 2]) {
  const float alpha = tile_alpha(p, tile);
  const int lane = threadIdx.x % 32;
  const int j = tile.col0 / 2 + 8 * (row / 16) + row % 8;
  if (j >= p.swiglu_ffn) return;
#pragma unroll
  for (int i = 0; i < kBM / 8; ++i) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int token = 8 * i + 2 * (lane % 4) + e;
      if (token >= tile.n_rows_tile) continue;
      const float act = swiglu(alpha * acc[4 * i + e], alpha * acc[4 * i + 2 + e], p.swiglu_limit);
      const int64_t offset = (int64_t)(tile.row0 + token) * p.ldd + j;
      if constexpr (kOutBf16) {
        static_cast<__nv_bfloat16*>(p.d)[offset] = __float2bfloat16_rn(act);
      } else {
        static_cast<float*>(p.d)[offset] = act;
      }
    }
  }
}

template <int kBM, bool kOutBf16>
__device__ __forceinline__ void ws_consume(const Nvfp4GemmParams& p, const int* s_offsets,
                                           const int* s_prefix, int n_groups, int n_tiles_n,
                                           const uint8_t* smem_tokens, const uint8_t* smem_raw,
                                           uint64_t* full, uint64_t* empty) {
  using Smem = WsSmem<kBM>;
  const int lane = threadIdx.x % 32;
  const int row = 64 * (threadIdx.x / 128 - 1) + 16 * ((threadIdx.x / 32) % 4) + lane / 4;
  uint32_t selector = (lane % 4) | ((lane % 4 + 4) << 4);
  // Kept in a register: otherwise the compiler re-reads threadIdx.x (S2R) every K step.
  keep_in_register(selector);
  const int n_tiles = s_prefix[n_groups], n_steps = p.kp / kTileK;
  auto slot_of = [](uint32_t i) { return static_cast<int>(i % Smem::kStages); };
  // Waits for stage i's bytes and loads its raw weights; with cp.async tokens the fence lets
  // wgmma (async proxy) see what the producer wrote (TMA writes are async-proxy already).
  auto fetch = [&](uint32_t i, WsRaw& raw) {
    mbar_wait(&full[slot_of(i)], (i / Smem::kStages) & 1);
    if (!p.a_tma) fence_proxy_async();
    ws_load_raw(smem_raw + slot_of(i) * Smem::kRawSlot, row, raw);
  };
  auto release = [&](uint32_t i) {
    if (lane == 0) mbar_arrive(&empty[slot_of(i)]);
  };
  auto tokens_of = [&](uint32_t i) { return smem_tokens + slot_of(i) * Smem::kTokenSlot; };

  float acc[kBM / 2];
#pragma unroll
  for (int i = 0; i < kBM / 2; ++i) acc[i] = 0.0f;  // each tile's first wgmma ignores it (scale-d 0)
  uint32_t frag0[16], frag1[16];
  WsRaw raw;
  uint32_t it = 0;
  for (int tile_index = blockIdx.x; tile_index < n_tiles; tile_index += gridDim.x) {
    const TileCoord tile = ws_tile<kBM>(s_offsets, s_prefix, n_groups, n_tiles_n, tile_index);
    fetch(it, raw);
    ws_decode(raw, selector, frag0);
    if (n_steps > 1) fetch(it + 1, raw);
    // Two K steps per trip so each fragment buffer has a fixed name: wgmma(kt) reads frag0
    // while frag1 gets step kt+1, once wgmma(kt-1), its last reader, has retired. `raw` holds
    // the step after the one being decoded; the next step's fetch is issued right after the
    // wgmma, so its wait and load overlap the wait for the previous wgmma.
    for (int kt = 0; kt < n_steps; kt += 2) {
      ws_mma<kBM>(frag0, tokens_of(it + kt), kt == 0, acc);
      wgmma_wait<1>();
      if (kt > 0) release(it + kt - 1);
      if (kt + 1 < n_steps) {
        ws_decode(raw, selector, frag1);
        ws_mma<kBM>(frag1, tokens_of(it + kt + 1), false, acc);
        if (kt + 2 < n_steps) fetch(it + kt + 2, raw);
        wgmma_wait<1>();
        release(it + kt);
        if (kt + 2 < n_steps) {
          ws_decode(raw, selector, frag0);
          if (kt + 3 < n_steps) fetch(it + kt + 3, raw);
        }
      }
    }
    wgmma_wait<0>();
    fence_operands(acc);
    release(it + n_steps - 1);
    it += n_steps;
    if (p.swiglu_ffn > 0) {
      ws_store_swiglu<kBM, kOutBf16>(p, tile, row, acc);
    } else {
      ws_store<kBM, kOutBf16>(p, tile, row, acc);
    }
  }
}

// a_map: the tensor map of A (bf16 [T, K], box [kBM, 64], 128-byte swizzle), read only when
// p.a_tma. Narrow token tiles run ws_ctas_per_sm(kBM) = 2 CTAs an SM (config.h).
template <int kBM, bool kOutBf16>
__global__ void __launch_bounds__(kWsThreads, ws_ctas_per_sm(kBM))
    nvfp4_ws_gemm_sm90_kernel(const __grid_constant__ Nvfp4GemmParams p,
                              const __grid_constant__ CUtensorMap a_map) {
  static_assert(kBM == 32 || kBM == 64 || kBM == 128 || kBM == 256,
                "tokens per tile are one wgmma N: 32, 64, 128 or 256");
  static_assert(kWsRows == 2 * 64 && kWsThreads == 3 * 128, "a producer and two consumers");
  using Smem = WsSmem<kBM>;
  extern __shared__ uint8_t smem_raw_bytes[];
  // Aligned by an offset from the shared array (not through an integer cast), so the compiler
  // still knows every pointer below is shared memory and emits LDS rather than generic loads.
  const uint32_t misalignment = smem_addr(smem_raw_bytes) % kSmemAlign;
  uint8_t* smem = smem_raw_bytes + (misalignment == 0 ? 0 : kSmemAlign - misalignment);
  uint8_t* smem_tokens = smem;
  uint8_t* smem_ring = smem_tokens + Smem::kTokens;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem_ring + Smem::kRaw);
  uint64_t* empty = full + Smem::kStages;
  int* s_offsets = reinterpret_cast<int*>(empty + Smem::kStages);
  int* s_prefix = s_offsets + kMaxGroups + 1;

  if (threadIdx.x == 0) {
    for (int s = 0; s < Smem::kStages; ++s) {
      // One cp.async arrival per producer thread, and thread 0's expect_tx arrival for the TMA.
      mbar_init(&full[s], p.a_tma ? 129 : 128);
      mbar_init(&empty[s], 8);   // one arrival per consumer warp
    }
    mbar_init_fence();
  }
  const int n_groups = p.offsets == nullptr ? 1 : p.n_groups;
  const int n_tiles_n = (p.n + kWsRows - 1) / kWsRows;
  load_group_offsets(p, s_offsets);
  scan_tile_prefix(s_offsets, n_groups, kBM, n_tiles_n, s_prefix);
  __syncthreads();

  if (threadIdx.x < 128) {
    setmaxnreg_dec<ws_producer_regs(kBM)>();
    ws_produce<kBM>(p, &a_map, s_offsets, s_prefix, n_groups, n_tiles_n, smem_tokens, smem_ring,
                    full, empty);
  } else {
    setmaxnreg_inc<ws_consumer_regs(kBM)>();
    ws_consume<kBM, kOutBf16>(p, s_offsets, s_prefix, n_groups, n_tiles_n, smem_tokens,
                              smem_ring, full, empty);
  }
}

}  // namespace dsv4::kernels::cuda::sm90

// The fused path's W4A16 expert kernel for decode sizes: each warp streams one 16-row m-tile of
// one group's weight matrix over all of K, so the only work per weight is its decode and the
// MMA, and warps never wait for each other inside a pass (what a warp keeps in shared memory is
// its own weight ring or scale slab; the block meets only to copy a pass's activation rows).
//
// Why this shape. At a few tokens per expert a MoE layer is a stream of the touched experts'
// NVFP4 bytes; on an H200 that stream is 4.2 TB/s, ~32 GB/s per SM, which one SM can decode
// only if the instructions per weight stay near the decode's own (~2.4 per element: per packed
// word two shifts per bf16 pair, two logic ops, one bf16x2 multiply by the block scale). The
// earlier kernel (expert_mma.cuh) split K over the 16 warps of a block and met them in shared
// memory per unit: its ~6.4 instructions per element (runtime divisions, 64-bit addressing per
// item, scale conversions, the epilogue behind two barriers) made it issue-bound at ~1 TB/s.
// Here K, the step count and the row addresses are fixed per warp before the loop; the loop body
// is loads, decode and MMA.
//
// Work. Block (x, y): y = active slot, taken from the last (the shared expert) down, or exit
// past n_active; x = (block of kWarps m-tiles, pass) with pass fastest, so the passes over one
// m-tile run side by side and share its weights in L2. A pass covers 8·kChunks rows of the group
// (kChunks MMA token chunks of 8); with more rows than kGridPasses passes hold, a block loops.
// Warp w takes m-tile mt of the block.
//
// Lane (g, c) = (lane / 4, lane % 4) owns rows g and g + 8 of the m-tile (gate row j and up row
// F + j for L1, so SwiGLU needs no exchange) and, in K step s (128 elements), the 32 elements
// [128 s + 32 c, +32): 16 bytes and 2 block scales per row, the 4 lanes of a row reading 64
// contiguous bytes. A ring of these steps is loaded ahead per lane (step_ring.cuh: at one token
// chunk 4 code steps in registers and the block scales in the warp's shared-memory slab, at two
// 8 whole steps in shared memory), refilled after each step's use. The token operand: lane
// (g, c) reads token g's same 32 elements of the bf16 activation row in the pair layout
// (pair_layout.cuh), one 16-byte load per packed word, just in time. At one token chunk the
// block first copies its pass's activation rows into shared memory (PassActivations, when they
// fit): read from L1/L2 just in time, their latency is a quarter of the gate-up kernel's stall
// samples at T = 1 (ncu; docs/bench_log.md, "NVFP4 MoE layer"); from shared memory it hides
// behind the decode.
//
// Scales: scale_pairs4 (pair_layout.cuh), one PRMT and one multiply-add per scale unless the
// step holds a zero or subnormal one.
//
// Deterministic: every output is one warp's MMA chain over K in a fixed order.
//
// Dimension letters: N rows of one expert matrix, K its columns, F expert width.
#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device/common.cuh"
#include "kernels/cuda/device/moe_combine.cuh"
#include "kernels/cuda/device/pdl.cuh"
#include "kernels/cuda/gemm/nvfp4/expert_mma.cuh"
#include "kernels/cuda/gemm/nvfp4/step_ring.cuh"

namespace dsv4::kernels::cuda::moe {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kStepK = kRingStepK;  // K elements per lane quartet and step
// The weight ring (step_ring.cuh), measured on the H200 (docs/bench_log.md, "NVFP4 MoE
// layer"): at one token chunk a register ring of 8 steps (128 registers, 4 blocks an SM instead
// of 5) is slower at every T ≤ 8 (Flash T = 1 61.3 -> 64.1 µs, T = 8 279 -> 297; the gate-up
// kernel under ncu at T = 3 66.6 -> 83.2 µs), and so is an 8-step shared-memory ring (Flash
// T = 1 59.3 -> 64.7, T = 8 290 -> 294), which wins at two chunks (Flash T = 64 1240 -> 1169, Pro
// 3859 -> 3541). Four token chunks with 3 register steps spill and run at ~1.1-1.6 TB/s; the
// launcher uses one or two. Slower or no better, so not done (H200, Flash T = 1 / 8 graph µs
// against 66 / 297): two MMA accumulator chains (66 / 293, noise), activations loaded one step
// ahead (spills: 69 / 300), a sliding L2 bulk prefetch 8-32 steps ahead of the ring (73-81 /
// 350-376), and the L2 asked for the down weights at the end of each gate-up warp or at its
// start (67-72 / 278-333).

// Register budget: 4 blocks an SM, i.e. 128 registers a thread. At 5 blocks (96 registers) the
// gate-up kernel spills 24 bytes, and every V4 decode grid (7 slots × 64 blocks at T = 1 on
// 132 SMs) fits in 4 anyway: 63.0 vs 66.2 µs at Flash T = 1 (H200, three runs each), T = 8 the
// same (295 vs 297).
constexpr int kMinBlocksPerSm = 4;
constexpr int kGridPasses = 4;

__device__ __forceinline__ void combine_if_last(const ExpertParams& p, int mt, int rows_done);

template <bool kGateUp, int kK, int kChunks, bool kActInSmem, bool kEarlyStart = false>
__device__ __forceinline__ void stream_pass(const ExpertParams& p, int group, int row_begin,
                                            int row_end, int lo_row, int hi_row, int c);

// The activation rows of one pass, in dynamic shared memory: row r (of the pass) at r · stride
// 16-byte units, stride = K/8 + 1 so that the rows a load reads start in different banks.
// The whole block copies them (cp.async) between two barriers, so every warp of the block must
// run the pass (the launcher uses this only when the grid has no idle m-tiles).
struct PassActivations {
  __device__ __forceinline__ static uint4* rows() {
    extern __shared__ uint4 pass_rows[];
    return pass_rows;
  }
  // 16-byte units from one row to the next; the launcher sizes the rows with it too.
  __host__ __device__ static constexpr int stride(int k) { return k / 8 + 1; }

  __device__ __forceinline__ static void stage(const ExpertParams& p, int row_begin, int row_end,
                                               int k) {
    const int units = k / 8;  // 16-byte units of a row
    const uint4* x = reinterpret_cast<const uint4*>(p.act_bf16);
    __syncthreads();  // the previous pass has read its rows
    for (int i = threadIdx.x; i < (row_end - row_begin) * units; i += kThreads) {
      const int r = i / units, unit = i % units;
      const int row = p.row_token ? p.row_token[row_begin + r] : row_begin + r;
      cp_async16(rows() + r * stride(k) + unit, x + int64_t{row} * units + unit);
    }
    cp_async_commit();
  }
  // After the caller's other copies are in flight: this thread's copies, then everyone's.
  __device__ __forceinline__ static void wait() {
    cp_async_wait<0>();
    __syncthreads();
  }
};

template <bool kGateUp, int kK, int kChunks, bool kActInSmem, bool kEarlyStart = false>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm)
    expert_stream_kernel(ExpertParams p, int n_passes) {
  static_assert(kDecodeScaleLog2 == 10, "alpha below undoes 2^-10 per decoded operand");
  constexpr int kRowsPerPass = 8 * kChunks;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, c = lane % 4;
  const int k = kK > 0 ? kK : p.k;
  const int mt = (blockIdx.x / n_passes) * kWarps + warp;
  const bool mt_on = mt < (kGateUp ? p.ffn / 8 : p.n_rows / 16);
  const int lo_row = kGateUp ? mt * 8 + g : mt * 16 + g;
  const int hi_row = kGateUp ? p.ffn + lo_row : lo_row + 8;
  // Every token uses the shared expert: while the routing front still runs (launch_pdl), the
  // first slot's blocks ask L2 for its rows of this m-tile.
  if (blockIdx.y == 0 && blockIdx.x % n_passes == 0 && mt_on && c < 2 && p.shared_packed) {
    const uint8_t* row = p.shared_packed + int64_t{c == 0 ? lo_row : hi_row} * (k / 2);
    for (int b = 0; b < k / 2; b += 4096) prefetch_l2_bulk(row + b, min(4096, k / 2 - b));
  }
  // kEarlyStart (one token, see launch): gate-up lets the down grid launch once its own wait is
  // over, and the down kernel reads the routing and starts its weights before its wait, so its
  // blocks stream while gate-up's last blocks still run. Reading the routing early is safe: the
  // down grid launches only after every gate-up block has passed its wait, that is after the
  // routing grid has completed; it reads through L2 (__ldcg), past any older line in L1.
  if constexpr (!kEarlyStart || kGateUp) pdl_wait();  // the routing and the activations
  if constexpr (kEarlyStart && kGateUp) pdl_trigger();
  auto routing = [](const int* q) { return kEarlyStart && !kGateUp ? __ldcg(q) : *q; };
  // Slots in reverse: y = 0 is the last active group, the shared expert (when there is one; it
  // has the most rows, so its blocks start first and its extra passes do not form the tail).
  const int n_active = routing(p.active + p.n_experts + 1) - (p.shared_packed ? 0 : 1);
  if (static_cast<int>(blockIdx.y) >= n_active || (!kActInSmem && !mt_on)) return;
  const int group = routing(p.active + n_active - 1 - blockIdx.y);
  const int group_begin = routing(p.offsets + group), group_end = routing(p.offsets + group + 1);
  int rows_done = 0;
  for (int pass = blockIdx.x % n_passes;; pass += n_passes) {
    const int row_begin = group_begin + pass * kRowsPerPass;
    if (row_begin >= group_end) break;
    const int row_end = min(group_end, row_begin + kRowsPerPass);
    stream_pass<kGateUp, kK, kChunks, kActInSmem, kEarlyStart>(p, group, row_begin, row_end, lo_row,
                                                               hi_row, c);
    rows_done += row_end - row_begin;
  }
  if (!kGateUp && p.combine_y != nullptr) combine_if_last(p, mt, rows_done);
}

// One pass: rows [row_begin, row_end) (≤ 8·kChunks) of `group` through this warp's m-tile.
template <bool kGateUp, int kK, int kChunks, bool kActInSmem, bool kEarlyStart>
__device__ __forceinline__ void stream_pass(const ExpertParams& p, int group, int row_begin,
                                            int row_end, int lo_row, int hi_row, int c) {
  using WeightRing = StreamStepRing<kChunks, kWarps, kK / kStepK, /*kScaleSlab=*/true>;
  const int g = threadIdx.x % 32 / 4;
  const int k = kK > 0 ? kK : p.k;
  const int n_steps = k / kStepK;
  const bool shared = group == p.n_experts;
  const int64_t matrix_bytes = int64_t{p.n_rows} * k / 2;
  const uint8_t* packed = shared ? p.shared_packed : p.packed + group * matrix_bytes;
  const uint8_t* scale = shared ? p.shared_scale : p.scale + group * (matrix_bytes / 8);
  const uint8_t* w_lo = packed + int64_t{lo_row} * (k / 2) + c * 16;
  const uint8_t* w_hi = packed + int64_t{hi_row} * (k / 2) + c * 16;
  // The activation rows start moving now, or with kEarlyStart's down kernel once gate-up is done.
  constexpr bool kStageAfterRing = kEarlyStart && !kGateUp;
  if constexpr (kActInSmem && !kStageAfterRing) PassActivations::stage(p, row_begin, row_end, k);
  // Activations of token g of each chunk, as 16-byte offsets from the rows' base (row 0 and
  // zeros when the chunk has no token g).
  const uint4* act_base =
      (kActInSmem ? PassActivations::rows() : reinterpret_cast<const uint4*>(p.act_bf16)) + c * 4;
  uint32_t act[kChunks];
  bool chunk_on[kChunks], token_on[kChunks];
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
    const int r = row_begin + 8 * i + g;
    chunk_on[i] = row_begin + 8 * i < row_end;  // warp-uniform
    token_on[i] = r < row_end;
    if constexpr (kActInSmem) {
      act[i] = static_cast<uint32_t>(8 * i + g) * PassActivations::stride(k);
    } else {
      const int row = !token_on[i] ? 0 : p.row_token ? p.row_token[r] : r;
      act[i] = static_cast<uint32_t>(row) * static_cast<uint32_t>(k / 8);
    }
  }

  WeightRing ring({w_lo, w_hi, scale + int64_t{lo_row} * (k / 16),
                   scale + int64_t{hi_row} * (k / 16), n_steps});
  if constexpr (kStageAfterRing) {
    pdl_wait();  // gate-up's activations
    PassActivations::stage(p, row_begin, row_end, k);
  }
  if constexpr (kActInSmem) PassActivations::wait();
  float acc[kChunks][4] = {};
  // Captures references: with copies of act, chunk_on and token_on nvcc computes the two-chunk
  // kernels' token addresses with more instructions.
  const auto load_tokens = [&](int s, int q, uint4 (&b)[kChunks]) {
#pragma unroll
    for (int i = 0; i < kChunks; ++i) {
      b[i] = make_uint4(0u, 0u, 0u, 0u);
      if (chunk_on[i] && token_on[i]) {
        const uint4* unit = act_base + act[i] + s * (kStepK / 8) + q;
        b[i] = kActInSmem ? *unit : __ldg(unit);
      }
    }
  };
  mma_weight_steps<kK / kStepK>(ring, n_steps, chunk_on, load_tokens, acc);

  const float alpha = __fmul_rn(shared ? *p.shared_global : p.global[group], 0x1p10f);
#pragma unroll
  for (int i = 0; i < kChunks; ++i) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {  // tokens 2c, 2c + 1 of the chunk
      const int64_t row = row_begin + 8 * i + 2 * c + j;
      if (row >= row_end) continue;
      if constexpr (kGateUp) {
        const float a = swiglu(alpha * acc[i][j], alpha * acc[i][2 + j], p.swiglu_limit);
        p.out_bf16[row * p.ffn + pair_layout_index(lo_row)] = float_to_bf16(a);
      } else {
        p.out_f32[row * p.n_rows + lo_row] = alpha * acc[i][j];
        p.out_f32[row * p.n_rows + hi_row] = alpha * acc[i][2 + j];
      }
    }
  }
}

// The down kernel's fused combine for m-tile mt (output columns 16 mt .. 16 mt + 15): this
// warp adds its rows to the m-tile's count; the warp that completes the count (every active
// group's rows) combines those columns for all tokens. Fences order the down rows before the
// count (threadFenceReduction's pattern); deterministic, since each column is summed by one
// thread in moe_combine.cuh's fixed order.
__device__ __forceinline__ void combine_if_last(const ExpertParams& p, int mt, int rows_done) {
  const int lane = threadIdx.x % 32;
  __syncwarp();
  __threadfence();
  int last = 0;
  if (lane == 0) {
    const int total_rows = p.offsets[p.n_experts + (p.shared_packed != nullptr ? 1 : 0)];
    last = atomicAdd(p.mtile_rows_done + mt, rows_done) + rows_done == total_rows;
  }
  if (!__shfl_sync(0xffffffffu, last, 0)) return;
  __threadfence();
  for (int i = lane; i < p.n_tokens * 16; i += 32) {
    const int t = i / 16, d = mt * 16 + i % 16;
    const TokenRoutes routes = token_routes(p.row_of, p.sel_weight, t, p.k_used);
    p.combine_y[int64_t{t} * p.n_rows + d] = combine_columns<float>(
        routes, p.k_used, p.shared_packed != nullptr, p.out_f32, p.n_rows, d);
  }
}

// Shared memory a block may use and still leave kMinBlocksPerSm blocks an SM (the H200's 227 KB,
// less the 1 KB the driver reserves a block).
constexpr int kSmemPerBlock = 227 * 1024 / kMinBlocksPerSm - 1024;

// The bytes of a pass's activation rows in shared memory (one token chunk, K constant), or 0
// where they do not fit beside the scale slab (step_ring.cuh) or some warp has no m-tile.
template <int kK>
int pass_activation_bytes(int n_mtiles, int max_group_rows) {
  if (n_mtiles % kWarps != 0) return 0;
  constexpr int kRingBytes = StreamStepRing<1, kWarps, kK / kStepK, true>::kSharedBytes;
  const int bytes = std::min(8, max_group_rows) * PassActivations::stride(kK) * 16;
  return bytes <= kSmemPerBlock - kRingBytes ? bytes : 0;
}

template <bool kGateUp, int kK, int kChunks, bool kActInSmem, bool kEarlyStart = false>
void launch_grid(const ExpertParams& p, dim3 grid, int smem_bytes, int n_passes,
                 cudaStream_t stream) {
  if constexpr (kActInSmem) {
    [[maybe_unused]] static const bool allowed = allow_dynamic_smem(
        expert_stream_kernel<kGateUp, kK, kChunks, true, kEarlyStart>, kSmemPerBlock);
  }
  launch_pdl(expert_stream_kernel<kGateUp, kK, kChunks, kActInSmem, kEarlyStart>, grid, kThreads,
             smem_bytes, stream, p, n_passes);
}

template <bool kGateUp, int kK, int kChunks>
void launch(const ExpertParams& p, int n_slots, int max_group_rows, cudaStream_t stream) {
  const int n_mtiles = kGateUp ? p.ffn / 8 : p.n_rows / 16;
  // Passes side by side in the grid, at most kGridPasses (most groups need one; a block whose
  // group has more rows loops over passes pass, pass + n_passes, ...).
  const int n_passes = std::min(kGridPasses, (max_group_rows + 8 * kChunks - 1) / (8 * kChunks));
  const dim3 grid((n_mtiles + kWarps - 1) / kWarps * n_passes, n_slots);
  if constexpr (kChunks == 1 && kK != 0) {
    const int act_bytes = pass_activation_bytes<kK>(n_mtiles, max_group_rows);
    // One token: the early start (expert_stream_kernel). Measured on the H200
    // (docs/bench_log.md, "NVFP4 MoE layer"): Flash T = 1 56.7 -> 53.8 µs, Pro 115.0 -> 113.4;
    // from two tokens on, where the early down blocks' weights compete with gate-up's stream for
    // longer, 1-2 % slower on Pro, so only here.
    if (act_bytes > 0 && max_group_rows == 1) {
      return launch_grid<kGateUp, kK, kChunks, true, true>(p, grid, act_bytes, n_passes, stream);
    }
    if (act_bytes > 0) {
      return launch_grid<kGateUp, kK, kChunks, true>(p, grid, act_bytes, n_passes, stream);
    }
  }
  launch_grid<kGateUp, kK, kChunks, false>(p, grid, 0, n_passes, stream);
}

template <bool kGateUp, int kK>
void launch_chunks(const ExpertParams& p, int n_slots, int max_group_rows, cudaStream_t stream) {
  if (max_group_rows <= 8) return launch<kGateUp, kK, 1>(p, n_slots, max_group_rows, stream);
  launch<kGateUp, kK, 2>(p, n_slots, max_group_rows, stream);
}

template <bool kGateUp>
void launch_k(const ExpertParams& p, int n_slots, int max_group_rows, cudaStream_t stream) {
  // The V4 shapes' K (D of Flash and Pro for L1, F of Flash and Pro for L2) as constants; any
  // other multiple of 128 through the generic loop.
  switch (p.k) {
    case 2048: return launch_chunks<kGateUp, 2048>(p, n_slots, max_group_rows, stream);
    case 3072: return launch_chunks<kGateUp, 3072>(p, n_slots, max_group_rows, stream);
    case 4096: return launch_chunks<kGateUp, 4096>(p, n_slots, max_group_rows, stream);
    case 7168: return launch_chunks<kGateUp, 7168>(p, n_slots, max_group_rows, stream);
    default: return launch_chunks<kGateUp, 0>(p, n_slots, max_group_rows, stream);
  }
}

}  // namespace

void launch_expert_stream(const ExpertParams& p, bool gate_up, int n_slots_max, int max_group_rows,
                          cudaStream_t stream) {
  DSV4_CHECK(p.k % kStepK == 0 && (gate_up ? p.ffn % 8 : p.n_rows % 16) == 0 && p.act_bf16 &&
                 (gate_up ? p.out_bf16 != nullptr : p.out_f32 != nullptr),
             "expert stream kernel: K %d must be a multiple of 128, bf16 activations", p.k);
  gate_up ? launch_k<true>(p, n_slots_max, max_group_rows, stream)
          : launch_k<false>(p, n_slots_max, max_group_rows, stream);
}

}  // namespace dsv4::kernels::cuda::moe

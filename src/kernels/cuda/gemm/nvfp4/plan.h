// Which NVFP4 kernel runs a GEMM, and on what grid: the one place that decides for the NVFP4
// family (plan.cpp gives the measurements behind each choice), from the call's shape alone, never
// from the group offsets' values (they live on the device). Plain C++, apart from the kernels so
// the choice can be read and changed without touching device code; launch.cu runs a plan, the
// benchmarks print it (describe).
//
// Dimension letters: T rows (tokens, all groups together), N output features, K input features,
// Kp = K padded to kWeightKAlign, G groups (experts).
#pragma once

#include <cstdint>
#include <string>

namespace dsv4::kernels::cuda::sm90 {

// ---- One GEMM: D[T, N] = alpha[g] · A[T, K] · B[g][N, K]ᵀ (nvfp4_gemm, nvfp4_grouped_gemm) ----
enum class Nvfp4GemmPath {
  kWsWgmma,  // ws_kernel.cuh: warp-specialised wgmma, many rows
  kSmallM,   // small_m_kernel.cuh: mma.sync, split-K atomics, up to 64 rows (per group)
  kStream,   // stream_kernel.cuh: one matrix, up to 16 rows, one launch
};

struct Nvfp4GemmPlan {
  Nvfp4GemmPath path = Nvfp4GemmPath::kWsWgmma;
  int grid = 0;              // kWsWgmma: persistent CTAs, ws_ctas_per_sm an SM
  int ws_tokens = 256;       // kWsWgmma: tokens per tile, one wgmma N (32, 64, 128 or 256)
  bool tma_tokens = true;    // kWsWgmma: token tiles by TMA where A allows (else cp.async)
  int small_tiles = 1;       // kSmallM: n8 token tiles per pass (1, 2, 4 or 8)
  int small_chunks = 4;      // kSmallM: 128-element K chunks per CTA
  int small_slots = 1;       // kSmallM: group slots (grid z): min(G, T)
  int stream_warps = 4;      // kStream at one token chunk: warps a CTA (4 or 8)
  int stream_min_blocks = 4; // kStream at one token chunk: CTAs an SM its registers allow (2, 4)
};

// n_rows: T; k: K, kp: Kp; n_groups: G; n_sm: multiprocessors on the device.
Nvfp4GemmPlan plan_nvfp4_gemm(int n_rows, int n, int k, int kp, int n_groups, int n_sm);

// The small-M kernel's plan (token tiles, K slice, group slots), whatever the stream kernel
// would take; the benchmark times it against the stream kernel.
Nvfp4GemmPlan plan_small_m(int n_rows, int n, int kp, int n_groups, int n_sm);

// The warp-specialised kernel's plan (token tile width, persistent grid), whatever M is; the
// benchmark times it against the small-M kernel on grouped calls.
Nvfp4GemmPlan plan_ws(int n_rows, int n, int n_groups, int n_sm);

// One line for benchmarks and logs, e.g. "ws 128 rows×64 tok" or "stream 8 warps, 2 CTAs/SM".
std::string describe(const Nvfp4GemmPlan& plan);

// ---- An MoE's expert GEMMs (ops/moe_ffn.cu): both layers of every active expert ----
enum class MoeExperts {
  kStream,   // expert_stream.cu: fused W4A16, a warp streams a 16-row m-tile over all of K
  kMma,      // expert_mma.cuh: fused W4A4 (NVFP4 activations), split-K in a persistent block
  kGrouped,  // the grouped GEMMs above (nvfp4_grouped_gemm_swiglu, nvfp4_grouped_gemm) between
             // a gather and the combine
};

// The fused expert kernel for the activations' format (w4a4: NVFP4, else bf16).
MoeExperts fused_moe_experts(bool w4a4);

// The expert GEMMs for T tokens: fused up to a crossover measured per format, grouped above.
MoeExperts plan_moe_experts(int64_t n_tokens, bool w4a4);

const char* describe(MoeExperts experts);

}  // namespace dsv4::kernels::cuda::sm90

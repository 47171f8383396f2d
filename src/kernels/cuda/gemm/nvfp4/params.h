// The parameters of one NVFP4 GEMM launch, dense or grouped, in device pointers (plain C++:
// filled by launch.cu, read by the kernels).
//
//   D[T, N] = alpha[g] · A[T, K] · B[g][N, K]ᵀ   for the rows of group g
//
// Dimension letters: T rows of A and D (tokens), N output features, K input features,
// Kp = K rounded up to kWeightKAlign, G groups (experts).
#pragma once

#include <cstdint>

namespace dsv4::kernels::cuda::sm90 {

struct Nvfp4GemmParams {
  const uint16_t* a;        // bf16 [T, lda]; columns ≥ K are never read (zero-filled)
  int64_t lda;              // row stride of a in elements, a multiple of 8
  const uint8_t* b_packed;  // u8 [G, N, Kp/2]  E2M1 codes, low nibble first, zero padded
  const uint8_t* b_scale;   // u8 [G, N, Kp/16] UE4M3, linear, zero padded
  const float* b_global;    // f32 [G] decode scale of each matrix
  const float* a_global;    // f32 [1] decode scale of a staged A, or nullptr (W4A16)
  const int32_t* offsets;   // i32 [G+1] row offsets on the device, or nullptr: one group of T
  void* d;                  // f32|bf16 [T, ldd]
  int64_t ldd;
  float* accum;             // f32 [T, N] split-K accumulator of the small-M kernel (may be d)
  int n_rows;               // T
  int n;                    // N
  int k;                    // K (multiple of 16)
  int kp;                   // Kp (multiple of kWeightKAlign)
  int n_groups;             // G
  bool d_bf16;
  bool a_tma;               // ws kernel: tokens by TMA through its tensor-map parameter (set by
                            // launch_ws), else by cp.async
  // ws kernel only, > 0: the SwiGLU epilogue. B's N = 2F rows are the gate [0, F) and up
  // [F, 2F) projections and D is [T, F] = swiglu(alpha · gate, alpha · up, swiglu_limit).
  int swiglu_ffn = 0;       // F
  float swiglu_limit = 0.0f;
};

// What the heuristics decide for one call (heuristics.cpp).
enum class Nvfp4GemmPath { kWsWgmma, kSmallM, kStream };

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

}  // namespace dsv4::kernels::cuda::sm90

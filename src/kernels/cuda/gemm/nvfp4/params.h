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

}  // namespace dsv4::kernels::cuda::sm90

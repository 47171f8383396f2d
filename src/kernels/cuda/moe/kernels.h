// Launchers of the MoE pipeline's kernels (cuda/moe/*.cu), called by moe_ffn.cu in a fixed
// order on one stream. Each checks cudaGetLastError after its launch.
//
// Dimension letters: T tokens, D model width, E routed experts, K experts per token, F expert
// width, S = T·(K+1) grouped rows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace dsv4::kernels::cuda::moe {

// ---- route.cu ----
struct RouterParams {
  const float* x;            // [T, D]
  const float* gate;         // [E, D]
  const float* bias;         // [E] or nullptr (hash routing)
  const int64_t* tid2eid;    // [V, K] or nullptr (score routing)
  const int64_t* token_ids;  // [T] (hash routing)
  int n_tokens, dim, n_experts, k_used, logits_splits;
  float route_scale;
  // [splits, T, E] scratch: logit partial sums (launch_router); the small router's scores
  // sqrt(softplus(logits)) [T, E], of hash layers only the T·K entries tid2eid picks.
  float* logits;
  int* sel_expert;    // [T, K+1]
  float* sel_weight;  // [T, K+1]
  int* counts;        // [E+1], zero on entry
  uint16_t* x_bf16;   // [T, D] pair-interleaved bf16 copy of x, or nullptr
  // Zeroed by the small router (route_small.cu) for the down kernel's fused combine, or nullptr.
  int* mtile_rows_done;  // [n_mtiles]
  int n_mtiles;
};
void launch_router(const RouterParams& p, cudaStream_t stream);
// Tokens × experts of one router logit block: 128 × 128 (8 × 8 outputs a thread) once there are
// enough tokens to fill the GPU with them, else 64 × 64. The workspace's logit splits follow it.
inline constexpr int64_t kRouterWideTileTokens = 1024;
inline int router_logit_tile(int64_t n_tokens) {
  return n_tokens >= kRouterWideTileTokens ? 128 : 64;
}

// ---- route_small.cu ----
// Where the pipeline puts the permutation (moe_pipeline.h's MoeWorkspace has the shapes).
struct PermuteOutputs {
  int* offsets;    // [E+2]
  int* active;     // [E+1], n_active at [E+1]
  int* row_token;  // [S]
  int* row_of;     // [T, K+1]
};
// Decode sizes: launch_router and launch_permute in two launches, without the zeroed counts
// (p.counts [E] is written, not added to; p.logits holds the scores [T, E]). Needs
// T ≤ kSmallRouteTokens and K ≤ 16. Given those scores, the selections and weights are
// cpu::moe_route's bit for bit (its f32 operations in its order).
inline constexpr int kSmallRouteTokens = 8;
void launch_route_small(const RouterParams& p, const PermuteOutputs& out, cudaStream_t stream);

// ---- permute.cu ----
// Groups rows by expert (stable in (token, slot) order; group E is the shared expert with every
// token) and fills offsets [E+2], active [E+1] + n_active, row_token [S], row_of [T, K+1].
void launch_permute(const int* sel_expert, const int* counts, int n_tokens, int k_used,
                    int n_experts, int* offsets, int* active, int* row_token, int* row_of,
                    cudaStream_t stream);
// y[t] = Σ over t's routed slots in grouped-row order of weight · down[row], then + down[shared
// row] (with_shared); each step one rounded f32 multiply and add, as cpu::moe_combine and
// cpu::add do.
void launch_combine(const float* down, const int* row_of, const float* sel_weight, int n_tokens,
                    int k_used, int dim, float* y, cudaStream_t stream, bool with_shared = true);

// ---- grouped_glue.cu (the grouped path's data movement) ----
// rows[r] = bf16(x[row_token[r]]), linear layout.
void launch_gather_bf16(const float* x, const int* row_token, int n_rows, int dim, uint16_t* rows,
                        cudaStream_t stream);
// Gathers staged NVFP4 rows (linear scales) by row_token.
void launch_gather_nvfp4(const uint8_t* packed, const uint8_t* scale, const int* row_token,
                         int n_rows, int dim, uint8_t* rows_packed, uint8_t* rows_scale,
                         cudaStream_t stream);

}  // namespace dsv4::kernels::cuda::moe

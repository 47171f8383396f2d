// The CPU reference of every op in kernels/ops.h: plain loops, f32 accumulation, OpenMP across
// rows at most, GEMMs through OpenBLAS. Same contracts as ops.h; called only by ops.cpp, which
// has already checked that the tensors are on the host.
#pragma once

#include "base/tensor.h"
#include "format/nvfp4.h"
#include "kernels/ops.h"

namespace dsv4::kernels::cpu {

// ---- Dense ops (f32) ----
void linear(const TensorView& x, const TensorView& w, const TensorView& y);
void rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& y);
void softmax(const TensorView& x, const TensorView& y);
void swiglu(const TensorView& gate_up, float limit, const TensorView& out);
void add(const TensorView& a, const TensorView& b, const TensorView& y);
void embedding(const TensorView& table, const TensorView& ids, const TensorView& y);

// ---- Hyper-connections ----
void hc_repeat(const TensorView& x, const TensorView& out);
void hc_split_sinkhorn(const TensorView& mixes, const TensorView& scale, const TensorView& base,
                       int64_t n_sinkhorn_iters, float eps, const HcMix& out);
void hc_head_weights(const TensorView& mixes, const TensorView& scale, const TensorView& base,
                     float eps, const TensorView& pre);
void hc_collapse(const TensorView& x, const TensorView& pre, const TensorView& y);
void hc_expand(const TensorView& f, const TensorView& residual, const TensorView& post,
               const TensorView& comb, const TensorView& out);

// ---- MoE routing and expert dispatch ----
void moe_route(const TensorView& logits, const TensorView& bias, const TensorView& hash_ids,
               float route_scale, const MoeRouting& out);
void moe_group(const TensorView& ids, const TensorView& order, const TensorView& offsets);
void moe_gather(const TensorView& x, const TensorView& order, const TensorView& y);
void moe_combine(const TensorView& expert_out, const TensorView& order, const TensorView& weights,
                 const TensorView& out);
void grouped_linear(const TensorView& x, const TensorView& w, const TensorView& offsets,
                    const TensorView& y);
void moe_ffn(const TensorView& x, const TensorView& token_ids, const MoeWeightsView& w,
             const MoeConfig& cfg, const TensorView& y);

// ---- NVFP4 (kernels/ops.h has the contracts) ----
void stage_activation(const TensorView& x, const TensorView& input_scale,
                      const StagedActivation& out);
void nvfp4_gemm(const StagedActivation& a, const format::Nvfp4View& b, const TensorView& d);
void nvfp4_gemm(const TensorView& a, const format::Nvfp4View& b, const TensorView& d);
void nvfp4_grouped_gemm(const StagedActivation& a, const format::Nvfp4View& b,
                        const TensorView& group_offsets, const TensorView& d);
void nvfp4_grouped_gemm(const TensorView& a, const format::Nvfp4View& b,
                        const TensorView& group_offsets, const TensorView& d);

// ---- Attention (kernels/ops.h has the contracts) ----
// Work (multiply-adds or elements) below which an attention op stays on one thread: a parallel
// region's fork and join cost more than a smaller loop, far more on a loaded machine.
inline constexpr int64_t kParallelWork = int64_t{1} << 16;
void rope(const TensorView& x, const TensorView& positions, const TensorView& inv_freq,
          RopeDirection direction);
void sparse_attention(const SparseAttentionParams& params);
void compressor_pool(const CompressorPoolParams& params);
void indexer_scores(const IndexerScoreParams& params);
void topk(const TensorView& scores, const TensorView& n_candidates, const TensorView& indices);

}  // namespace dsv4::kernels::cpu

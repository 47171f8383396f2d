// The CUDA implementations of the ops in kernels/ops.h: host launch functions in plain C++ (no
// CUDA headers), same contracts as the CPU reference in kernels/cpu/cpu_ops.h, which each is
// tested against. Called only by ops.cpp, after it checked that the tensors are on the device.
// They return a non-OK Status only for a variant the device does not implement (e.g. an f32
// W4A16 operand); a CUDA error is a bug and aborts through DSV4_CUDA_CHECK.
#pragma once

#include "base/tensor.h"
#include "dsv4/status.h"
#include "format/nvfp4.h"
#include "kernels/ops.h"

namespace dsv4::kernels::cuda {

// ---- The plain ops (one small .cu each or per family, mirroring kernels/cpu/): every variant
// is implemented, so they return void like their CPU twins. Each says in its .cu how it relates
// to the CPU: bit-identical (add, embedding, hc_repeat/collapse/expand, moe_gather/combine,
// moe_group, topk) or equal up to f32 summation order and libm ulps (the rest). ----
void linear(const TensorView& x, const TensorView& w, const TensorView& y);
void rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& y);
void softmax(const TensorView& x, const TensorView& y);
void swiglu(const TensorView& gate_up, float limit, const TensorView& out);
void add(const TensorView& a, const TensorView& b, const TensorView& y);
void embedding(const TensorView& table, const TensorView& ids, const TensorView& y);

void hc_repeat(const TensorView& x, const TensorView& out);
void hc_split_sinkhorn(const TensorView& mixes, const TensorView& scale, const TensorView& base,
                       int64_t n_sinkhorn_iters, float eps, const HcMix& out);
void hc_head_weights(const TensorView& mixes, const TensorView& scale, const TensorView& base,
                     float eps, const TensorView& pre);
void hc_collapse(const TensorView& x, const TensorView& pre, const TensorView& y);
void hc_expand(const TensorView& f, const TensorView& residual, const TensorView& post,
               const TensorView& comb, const TensorView& out);

void moe_route(const TensorView& logits, const TensorView& bias, const TensorView& hash_ids,
               float route_scale, const MoeRouting& out);
void moe_group(const TensorView& ids, const TensorView& order, const TensorView& offsets);
void moe_gather(const TensorView& x, const TensorView& order, const TensorView& y);
void moe_combine(const TensorView& expert_out, const TensorView& order, const TensorView& weights,
                 const TensorView& out);
void grouped_linear(const TensorView& x, const TensorView& w, const TensorView& offsets,
                    const TensorView& y);

void rope(const TensorView& x, const TensorView& positions, const TensorView& inv_freq,
          RopeDirection direction);
void sparse_attention(const SparseAttentionParams& params);
void compressor_pool(const CompressorPoolParams& params);
void indexer_scores(const IndexerScoreParams& params);
void topk(const TensorView& scores, const TensorView& n_candidates, const TensorView& indices);

// ---- NVFP4: bit-identical to cpu::stage_activation; GEMMs equal to the CPU up to the f32
// summation order (exact bf16 products, alpha applied once in the epilogue) ----
Status stage_activation(const TensorView& x, const TensorView& input_scale,
                        const StagedActivation& out);
Status nvfp4_gemm(const StagedActivation& a, const format::Nvfp4View& b, const TensorView& d);
Status nvfp4_gemm(const TensorView& a, const format::Nvfp4View& b, const TensorView& d);
Status nvfp4_grouped_gemm(const StagedActivation& a, const format::Nvfp4View& b,
                          const TensorView& group_offsets, const TensorView& d);
Status nvfp4_grouped_gemm(const TensorView& a, const format::Nvfp4View& b,
                          const TensorView& group_offsets, const TensorView& d);

// ---- MoE (kernels/cuda/moe/): the fused block; equal to cpu::moe_ffn up to f32 summation order
// (W4A16) and the activation re-quantization that order can flip (W4A4) ----
int64_t moe_ffn_workspace_bytes(int64_t n_tokens, const MoeWeightsView& w, const MoeConfig& cfg);
Status moe_ffn(const TensorView& x, const TensorView& token_ids, const MoeWeightsView& w,
               const MoeConfig& cfg, const TensorView& workspace, const TensorView& y);

}  // namespace dsv4::kernels::cuda

// The device-agnostic ops the model is written against. Every op has a CPU reference
// (kernels/cpu/) and, where it matters for speed, a CUDA implementation (kernels/cuda/) with
// the same contract; ops.cpp dispatches on the tensors' device and is the only place in the
// tree that branches on it. Tensors are TensorViews; shapes are in the comments.
//
// Contract shared by every op: all tensors of one call live on one device; shapes and dtypes
// that do not match the comment are bugs (DSV4_CHECK), never user errors, because the loader
// validated every weight. An op returns a non-OK Status only when the device has no
// implementation of it.
//
// Dimension letters: T tokens (rows), D model width, N output features, K input features,
// E experts, F expert width, M residual streams (hc_mult).
#pragma once

#include <functional>

#include "base/float_convert.h"
#include "base/tensor.h"
#include "dsv4/status.h"
#include "format/fp8_block.h"
#include "format/nvfp4.h"

namespace dsv4::kernels {

// ---- Dense ops (f32) --------------------------------------------------------------------------
// Row-major 2-D views whose rows may be strided (stride[1] == 1): a column slice of a wider
// matrix is a valid operand, so fused projections (gate|up) need no copy.

// y[T, N] = x[T, K] · w[N, K]ᵀ, f32 accumulation (OpenBLAS on the CPU, row by row:
// batch-invariant).
Status linear(const TensorView& x, const TensorView& w, const TensorView& y);

// y[T, G·R] = x[T, G·K] · w[G·R, K]ᵀ block-diagonally: group g's outputs [g·R, (g+1)·R) are
// x's columns [g·K, (g+1)·K) times w's rows [g·R, (g+1)·R) (the attention's grouped output
// projection wo_a, in one call instead of G). Each group's bits are linear()'s on the CPU.
Status block_diagonal_linear(const TensorView& x, const TensorView& w, int64_t n_groups,
                             const TensorView& y);

// The same two with an FP8 weight (format/fp8_block.h: e4m3 with power-of-two 128 × 128 block
// scales, as an FP8 checkpoint stores it), decoded inside the kernel: every e4m3 · scale is a
// bf16 and its f32 value is the host decode's, so y has the bits of the call on that decoded
// weight (its bf16 form on a GPU, its f32 form on the CPU). The exact profile's linear; the fast
// profile's FP8 GEMM quantizes x instead (docs/numerics.md).
Status linear(const TensorView& x, const format::Fp8BlockView& w, const TensorView& y);
Status block_diagonal_linear(const TensorView& x, const format::Fp8BlockView& w, int64_t n_groups,
                             const TensorView& y);

// y[T, D] = x / sqrt(mean(x²) + eps) ⊙ weight[D], the mean over the last dim in f32.
// An empty `weight` (data == nullptr) gives the unweighted norm (mHC input norm, per-head q
// norm). y may alias x. The sum of squares is in float64 in one fixed order, so every device
// gives the same bits however it splits a row (kRmsNormLanes, kernels/contracts.h): lane j of
// 1024 sums x[j]², x[j + 1024]², … in turn, and the lanes are added pairwise (neighbours first,
// then neighbouring pairs, …). Then inv_rms = 1 / sqrt(f32(sum / D) + eps) and
// y = (x · inv_rms) · weight, in f32.
Status rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& y);

// y[T, N] = softmax of each row (max-subtracted). y may alias x.
Status softmax(const TensorView& x, const TensorView& y);

// out[T, F] = silu(min(gate, limit)) · clamp(up, -limit, limit) with gate = gate_up[:, :F] and
// up = gate_up[:, F:] (transformers' DeepseekV4Experts._apply_gate: the gate gets no lower
// clamp). limit == 0 disables both clamps.
Status swiglu(const TensorView& gate_up, float limit, const TensorView& out);

// y = a + b, same shape, contiguous. y may alias a or b.
Status add(const TensorView& a, const TensorView& b, const TensorView& y);

// y[T, D] = table[ids[t], :] for a table of any dtype (f32 embeddings, i64 tid2eid rows), y of
// the same dtype; ids i64 [T], each in [0, V) (the caller validated them).
Status embedding(const TensorView& table, const TensorView& ids, const TensorView& y);

// y[i, :] = the row of y's width and dtype at address rows[i] (rows i64 [n] on y's device), y
// [n, W] contiguous: rows of many buffers, or scattered rows of one (the rows a speculative step
// kept of each sequence), made one matrix in one launch, however many sequences they come from.
Status gather_rows(const TensorView& rows, const TensorView& y);

// Many copies in one launch: bytes[i] bytes from address sources[i] to address destinations[i]
// (each i64 [n], addresses on the device the tables are on), no two of them overlapping: the
// small copies of a step's sequences (a verify step's rollback of every compressor that pooled)
// in one launch, not one each.
Status copy_blocks(const TensorView& sources, const TensorView& destinations,
                   const TensorView& bytes);

// Two chains of ops on `device` that share no data, enqueued so that a GPU runs them at once:
// `side`'s ops on a second stream, `main`'s on the thread's stream, and every op after the call
// after both (base/device_stream.h: the fork and join, what `side` may allocate, graph
// capture). `main` is skipped when `side` fails. The CPU runs side, then main. Each op gives
// its own bits either way: neither chain reads what the other writes.
Status run_beside(Device device, const std::function<Status()>& side,
                  const std::function<Status()>& main);

// ---- Hyper-connections (mHC; transformers DeepseekV4HyperConnection / DeepseekV4HyperHead) ----

// The three mixes of one mHC site, per token.
struct HcMix {
  TensorView pre;   // f32 [T, M]     weights collapsing the M streams into the block input
  TensorView post;  // f32 [T, M]     placement of the block output on each stream, in [0, 2]
  TensorView comb;  // f32 [T, M, M]  doubly-stochastic stream mixer
};

// The initial streams: out[t, m, :] = x[t, :] for every stream m; x f32 [T, D], out [T, M, D].
Status hc_repeat(const TensorView& x, const TensorView& out);

// From the mix logits m f32 [T, (2+M)·M] (pre | post | comb, comb row-major [M, M]),
// scale f32 [3] and base f32 [(2+M)·M]:
//   pre  = σ(m_pre · scale[0] + base_pre) + eps
//   post = 2 σ(m_post · scale[1] + base_post)
//   comb = softmax_rows(m_comb · scale[2] + base_comb) + eps, then columns normalised, then
//          n_sinkhorn_iters − 1 rounds of (rows, columns); every division adds eps.
Status hc_split_sinkhorn(const TensorView& mixes, const TensorView& scale, const TensorView& base,
                         int64_t n_sinkhorn_iters, float eps, const HcMix& out);

// The final collapse's weights: pre f32 [T, M] = σ(mixes[T, M] · scale[0] + base[M]) + eps.
Status hc_head_weights(const TensorView& mixes, const TensorView& scale, const TensorView& base,
                       float eps, const TensorView& pre);

// y[t, :] = Σ_m pre[t, m] · x[t, m, :]; x f32 [T, M, D], y f32 [T, D].
Status hc_collapse(const TensorView& x, const TensorView& pre, const TensorView& y);

// out[t, j, :] = post[t, j] · f[t, :] + Σ_i comb[t, i, j] · residual[t, i, :]: comb is consumed
// transposed (Sinkhorn's matrix is not symmetric, so the direction matters). f [T, D],
// residual and out [T, M, D]; out must not alias residual. f_addend f32 [T, D] (rows as f's),
// or empty: f + f_addend, one rounded f32 add (the bits of add, then hc_expand), takes f's
// place; the FFN site adds its shared expert's output to the routed experts' sum there, a
// launch fewer in a decode step.
Status hc_expand(const TensorView& f, const TensorView& f_addend, const TensorView& residual,
                 const TensorView& post, const TensorView& comb, const TensorView& out);

// One site's pre side after its mix projection, fused (a decode step's small ops in one launch):
// hc_split_sinkhorn(mixes, scale, base, n_sinkhorn_iters, hc_eps, mix), then the block input
// y f32 [T, D] = rms_norm(hc_collapse(streams, mix.pre), norm_weight, norm_eps). streams f32
// [T, M, D]. The bits of those three calls.
struct HcPreNormParams {
  TensorView mixes, scale, base;
  int64_t n_sinkhorn_iters = 0;
  float hc_eps = 0.0f;
  HcMix mix;
  TensorView streams;
  TensorView norm_weight;  // [D], or empty (unweighted)
  float norm_eps = 0.0f;
  TensorView y;
};
Status hc_pre_norm(const HcPreNormParams& params);

// hc_expand(f, f_addend, residual, post, comb, out), then the next site's input norm of the new
// streams: normed f32 [T, M·D] = rms_norm(out as [T, M·D], unweighted, eps). The bits of the
// two calls.
Status hc_expand_norm(const TensorView& f, const TensorView& f_addend, const TensorView& residual,
                      const TensorView& post, const TensorView& comb, float eps,
                      const TensorView& out, const TensorView& normed);

// ---- MoE routing and expert dispatch (transformers DeepseekV4TopKRouter / HashRouter /
// Experts). Rows of a grouped GEMM operand are the T·K (token, slot) pairs sorted by expert. ----

struct MoeRouting {
  TensorView weights;  // f32 [T, K] routing weights (renormalised, times route_scale)
  TensorView ids;      // i32 [T, K] expert ids
};

// Scores s = sqrt(softplus(logits[T, E])). Selection: hash_ids i64 [T, K] when given (hash
// layers; bias empty), else the top K of s + bias[E] (the bias picks experts, never weighs
// them). weights = s[ids] / (Σ_k s[ids] + 1e-20) · route_scale.
Status moe_route(const TensorView& logits, const TensorView& bias, const TensorView& hash_ids,
                 float route_scale, const MoeRouting& out);

// Groups the T·K slots (slot = t·K + k) by expert, stably: order i32 [T·K] lists slots expert
// by expert, offsets i32 [E+1] delimits each expert's rows of `order`.
Status moe_group(const TensorView& ids, const TensorView& order, const TensorView& offsets);

// y[r, :] = x[order[r] / K, :]; x f32 [T, D], y f32 [T·K, D].
Status moe_gather(const TensorView& x, const TensorView& order, const TensorView& y);

// out[t, :] = Σ over t's slots of weights[slot] · expert_out[row(slot), :], accumulated from
// zero in row order (expert by expert, as transformers' index_add_ loop does).
// expert_out f32 [T·K, D], weights f32 [T, K], out f32 [T, D].
Status moe_combine(const TensorView& expert_out, const TensorView& order, const TensorView& weights,
                   const TensorView& out);

// Rows [offsets[g], offsets[g+1]) of y[R, N] = those rows of x[R, K] · w[g]ᵀ, w f32 [G, N, K],
// offsets i32 [G+1] (the dense-expert twin of nvfp4_grouped_gemm).
Status grouped_linear(const TensorView& x, const TensorView& w, const TensorView& offsets,
                      const TensorView& y);

// ---- NVFP4 (docs/nvfp4.md) ----------------------------------------------------------------------
// Weights are format::Nvfp4View stacks [G, N, K]; activations are staged into the same format
// with one global scale. GEMMs decode both operands to their exact values (every e2m1 · ue4m3
// is exact in bf16), accumulate in f32 and apply the global scales once, as the epilogue alpha:
//   W4A4:  D = alpha · Σ_k (a·sfa)(b·sfb),  alpha = a.global_scale · b.global_scale[g]
//   W4A16: D = alpha · Σ_k  a   · (b·sfb),  alpha = b.global_scale[g]
// computed as the fp32 product alpha (a·b in that order), then D = alpha · acc, then the
// rounding to bf16 if D is bf16. The CUDA exact path reproduces this up to summation order.

// An activation in NVFP4 is a format::StagedActivation, defined with the format so that
// calls from kernels/cpu and kernels/cuda never find these ops by argument-dependent lookup.
using format::StagedActivation;

// Quantizes x f32|bf16 [T, K] (K a multiple of 16) into `out` with the exact arithmetic of
// format::quantize_nvfp4_block. Global scale:
//   static  (input_scale f32 [1], ModelOpt's calibrated decode scale): decode = input_scale;
//   dynamic (input_scale empty, data == nullptr): decode = amax|x| / 2688 over the whole tensor;
// then encode = 1 / decode (format::GlobalScale). out.global_scale[0] = decode. Swizzled
// padding bytes are written as zero.
Status stage_activation(const TensorView& x, const TensorView& input_scale,
                        const StagedActivation& out);

// d f32|bf16 [T, N] = alpha · a[T, K] · b[0]ᵀ for a one-matrix stack b [1, N, K].
Status nvfp4_gemm(const StagedActivation& a, const format::Nvfp4View& b, const TensorView& d);
// W4A16: a bf16 [T, K] (the CUDA path) or f32 (CPU only).
Status nvfp4_gemm(const TensorView& a, const format::Nvfp4View& b, const TensorView& d);

// MoE: rows of a are grouped by expert. group_offsets i32 [G+1] on the operands' device:
// offsets[0] = 0, non-decreasing, offsets[G] = T; rows [offsets[g], offsets[g+1]) multiply
// b[g] with alpha[g]. Empty groups are allowed. d f32|bf16 [T, N].
Status nvfp4_grouped_gemm(const StagedActivation& a, const format::Nvfp4View& b,
                          const TensorView& group_offsets, const TensorView& d);
Status nvfp4_grouped_gemm(const TensorView& a, const format::Nvfp4View& b,
                          const TensorView& group_offsets, const TensorView& d);

// ---- FP8 (the fast profile's linears; format/fp8_block.h, docs/numerics.md) -------------------
// DeepSeek-V4's FP8 linear as its own inference runs it (inference/kernel.py act_quant and
// fp8_gemm; DeepGEMM's sm90 FP8 GEMM on Hopper): the activation quantized per token in 1 × 128
// groups, the weight E4M3 with one scale per 128 × 128 block, both fed to FP8 tensor cores.
// Dimension letters here: Kb = ceil(K/128).

// An activation in FP8: row t's columns [128 j, 128 j + 128) are e4m3(values[t, ·]) · scales[t, j].
struct Fp8Activation {
  TensorView values;  // f8_e4m3 [T, K], contiguous
  TensorView scales;  // f32 [T, Kb], contiguous; every scale a power of two
};

// out = x f32 [T, K] (rows may be strided) quantized group by group with the rule of V4's
// act_quant under scale_fmt "ue8m0", which V4-Flash's and -Pro's configs set (so its scales
// are exact E8M0; V3's act_quant had s = amax / 448, not rounded):
//   amax = max(max over the group of |x|, 1e-4)
//   s    = 2^ceil(log2(amax · f32(1/448)))   the product one f32 multiply, its exponent then
//                                            rounded up from the bits (fast_round_scale)
//   q    = e4m3(x / s), round to nearest even; |x / s| ≤ 448 by the choice of s
// The reference quantizes its bf16 activation; dsv4 quantizes the f32 one it holds. CUDA and
// CPU give identical bytes.
Status quantize_activation_fp8(const TensorView& x, const Fp8Activation& out);

// y f32 [T, N] (rows may be strided) = a · wᵀ for w an FP8 block matrix [N, K] on y's device,
// with DeepGEMM's accumulation: per 128-column block j of K, a partial sum of the raw codes
//   p[t, n, j] = Σ_{k in block j} e4m3(a.values[t, k]) · e4m3(w.values[n, k])
// (each product exact in f32), then promoted into an f32 accumulator
//   acc[t, n] = fma(a.scales[t, j] · w.block_scales[n / 128, j], p[t, n, j], acc[t, n])
// (the scale product one f32 multiply: exact for power-of-two scales). The CPU sums p in f32
// in column order and the blocks j in order. CUDA computes p on the FP8 tensor cores, whose
// adder keeps fewer bits than f32 (the reason DeepSeek promotes every 128 columns), and the
// small-M kernel sums the blocks j in per-warp runs before adding the runs; both stay within
// the bound tests/kernels/fp8_linear_cuda_test.cpp states against a float64 evaluation.
// The CUDA kernels need K a multiple of 16 and w's row stride a multiple of 16 bytes (every
// V4 linear has both); other shapes get an unimplemented Status there.
Status linear_fp8(const Fp8Activation& a, const format::Fp8BlockView& w, const TensorView& y);

// y f32 [T, G·R] (rows may be strided) = linear_fp8 block-diagonally, the fast profile's wo_a:
// group g's outputs [g·R, (g+1)·R) are linear_fp8 of a's columns [g·K, (g+1)·K) (with their
// scales [g·Kb, (g+1)·Kb)) and w's rows [g·R, (g+1)·R), for a [T, G·K] quantized as one
// activation and w an FP8 block matrix [G·R, K]. K and R must be multiples of 128 (each group
// whole activation groups and whole weight blocks; V4's K 4096, R 1024). Each group's bits are
// linear_fp8's on the CPU; CUDA runs every group in one launch, within linear_fp8's bound.
Status block_diagonal_linear_fp8(const Fp8Activation& a, const format::Fp8BlockView& w,
                                 int64_t n_groups, const TensorView& y);

// The fast profile's linear for an f32 activation: quantize_activation_fp8(x, scratch), then
// linear_fp8(scratch, w, y). scratch is shaped for x ([T, K] and [T, Kb]) on x's device.
Status linear_fp8(const TensorView& x, const format::Fp8BlockView& w, const Fp8Activation& scratch,
                  const TensorView& y);

// The ops that make an FP8 linear's input, each fused with the quantizer, so that the fast
// profile quantizes an activation once, where it is made, instead of in a launch of its own
// before each linear: the plain op's output y as that op writes it (the other readers of y
// keep it), and y_fp8, shaped for y, with the bytes quantize_activation_fp8(y, y_fp8) gives.
// CUDA runs each in one launch (the norms where their kernel holds the row in registers: rows of
// up to 32768 columns, every V4 width, and M = 4 streams for hc_pre_norm_fp8; else their parts,
// then the quantizer); the CPU runs the two ops.
// rms_norm(x, weight, eps, y), then the quantizer (y may alias x).
Status rms_norm_fp8(const TensorView& x, const TensorView& weight, float eps, const TensorView& y,
                    const Fp8Activation& y_fp8);
// swiglu(gate_up, limit, out), then the quantizer of out.
Status swiglu_fp8(const TensorView& gate_up, float limit, const TensorView& out,
                  const Fp8Activation& out_fp8);
// hc_pre_norm(params), then the quantizer of the block input params.y.
Status hc_pre_norm_fp8(const HcPreNormParams& params, const Fp8Activation& y_fp8);
// And rope_fp8 for the attention output before wo_a, declared beside rope (attention section).

// ---- MoE (docs/moe.md)
// --------------------------------------------------------------------------- One DeepSeek-V4 MoE
// block as a fused op: router, the routed NVFP4 experts and the shared expert. The CPU version is
// the composition of the plain ops above (linear, stage_activation, nvfp4_grouped_gemm, nvfp4_gemm,
// swiglu) and is the contract the CUDA pipeline matches.

enum class MoeMode {
  kW4A16,  // bf16 activations (x and the SwiGLU output rounded to bf16): the exact path
  kW4A4,   // activations staged to NVFP4 (stage_activation; the checkpoint's calibrated static
           // global scale where it has one, else a dynamic one): Blackwell's math
};

// The bulk of the routed experts' two NVFP4 stacks: codes and block scales, per-matrix scales
// aside (expert offload's copies, MoeWeightsView::touched_copies).
struct ExpertBulkCopies {
  TensorView w13_packed, w13_block_scale;  // u8 [E, 2F, D/2], [E, 2F, D/16]
  TensorView w2_packed, w2_block_scale;    // u8 [E, D, F/2], [E, D, F/16]
  bool empty() const { return w13_packed.data == nullptr; }
};

// to's experts listed in `active` become from's, byte for byte, in all four regions; the other
// experts of `to` keep their bytes. active i32 [E+2]: expert groups in increasing order in
// [0, n), their count n ≤ E + 1 at [E+1] (the list moe_ffn's routing writes; an id outside
// [0, E), such as the shared expert's group E, names no routed expert and is skipped). from and
// to: the same shapes, contiguous, 16-byte aligned, one expert's slice of each a multiple of 16
// bytes. moe_ffn runs it between its routing and its expert GEMMs (MoeWeightsView::touched_copies).
Status copy_touched_experts(const TensorView& active, const ExpertBulkCopies& from,
                            const ExpertBulkCopies& to);

// One layer's MoE weights as views (all on the device the op runs on).
struct MoeWeightsView {
  TensorView gate;        // f32 [E, D]  router
  TensorView bias;        // f32 [E]     selection bias; empty for hash routing
  TensorView tid2eid;     // i64 [V, K]  experts per token id; empty for score routing
  format::Nvfp4View w13;  // [E, 2F, D]  gate rows then up rows, linear scales
  format::Nvfp4View w2;   // [E, D, F]
  // The shared expert in NVFP4 (docs/moe.md), or both empty (packed.data == nullptr): y is then
  // the routed sum alone and the caller adds its own (e.g. dense) shared expert.
  format::Nvfp4View shared_w13;  // [1, 2F, D]
  format::Nvfp4View shared_w2;   // [1, D, F]
  // W4A4 only: the decode scale each expert input is staged with, f32 [1] (a calibrated
  // input_scale: stage_activation's static scale), or empty for the dynamic one.
  TensorView w13_input_scale{};
  TensorView w2_input_scale{};
  // Expert offload (checkpoint/expert_offload.h) leaves w13's and w2's codes and block scales in
  // mapped host memory, which kernels read over PCIe at a fraction of its copy rate. Buffers
  // shaped like those four make the op copy the routed experts its routing touches into them
  // (copy_touched_experts: on the GPU the routing's list stays on the device, no host
  // synchronisation) and run its GEMMs on the copies. Empty: the GEMMs read w13 and w2 where
  // they are.
  ExpertBulkCopies touched_copies{};
  bool has_shared() const { return shared_w13.packed.data != nullptr; }
  // The routed stacks' bulk as the checkpoint holds it (copy_touched_experts' `from`).
  ExpertBulkCopies routed_bulk() const {
    return {w13.packed, w13.block_scale, w2.packed, w2.block_scale};
  }
  // The weights the expert GEMMs read: these, or with touched_copies the copies in place of the
  // routed stacks' bulk.
  MoeWeightsView as_read() const {
    if (touched_copies.empty()) return *this;
    MoeWeightsView read = *this;
    read.w13.packed = touched_copies.w13_packed;
    read.w13.block_scale = touched_copies.w13_block_scale;
    read.w2.packed = touched_copies.w2_packed;
    read.w2.block_scale = touched_copies.w2_block_scale;
    read.touched_copies = {};
    return read;
  }
};

struct MoeConfig {
  int n_expert_used = 0;  // K
  float routed_scaling_factor = 1.0f;
  float swiglu_limit = 0.0f;  // 0 disables the clamp
  MoeMode mode = MoeMode::kW4A16;
};

// Device scratch moe_ffn needs for T tokens (CUDA; the CPU version allocates its own).
int64_t moe_ffn_workspace_bytes(int64_t n_tokens, const MoeWeightsView& w, const MoeConfig& cfg);

// y f32 [T, D] = Σ_k weight[t, k] · expert_{e[t, k]}(x[t]) + shared(x[t]), x f32 [T, D] the
// ffn-normed hidden state. Router: logits = x · gateᵀ (f32), s = sqrt(softplus(logits)); score
// routing takes the top K of s + bias (ties to the lower expert id, in descending order), hash
// routing takes tid2eid[token_ids[t]] (token_ids i64 [T]; empty for score routing); weight =
// s[e] / (Σ_selected s + 1e-20) · routed_scaling_factor. Expert(x) = down(swiglu(gate_up(x))),
// NVFP4 GEMMs (kernels above) with the activations staged per `mode` once per tensor: x over all
// T tokens, the SwiGLU output over all T·K routed rows and T shared rows together (a dynamic
// scale spans them; w13_input_scale / w2_input_scale replace it when given). The combine
// sums in f32 in the order k = 0..K-1, then the shared expert. workspace u8 [bytes] (CUDA only,
// moe_ffn_workspace_bytes; may be empty on the CPU). Deterministic on both devices.
Status moe_ffn(const TensorView& x, const TensorView& token_ids, const MoeWeightsView& w,
               const MoeConfig& cfg, const TensorView& workspace, const TensorView& y);

// ---- Attention (model/attention.cpp; ../shared/docs/deepseek_v4.md §2.4) -----------------------
// Dimension letters here: H heads, Dh head dim, P rope pairs (the trailing 2P dims of a head),
// N kv rows, K candidates per query, S compressor rows, m compress ratio, c = 2 (CSA) or 1 (HCA),
// d compressed entry width, HI / DI indexer heads / head dim.

enum class RopeDirection {
  kForward,  // rotate by +pos·θ (q, kv, compressed entries)
  kInverse,  // rotate by −pos·θ (the attention output, whose V carried the keys' rotation)
};

// Interleaved (GPT-J) RoPE in place on the trailing 2P dims of every head of x f32 [T, H, Dh]
// (or [T, Dh]): pair i = (x[Dh−2P+2i], x[Dh−2P+2i+1]) turns by positions[t]·inv_freq[i], the
// angle one f32 product as in transformers. positions i64 [T], inv_freq f32 [P].
Status rope(const TensorView& x, const TensorView& positions, const TensorView& inv_freq,
            RopeDirection direction);

// rope(x, positions, inv_freq, direction) in place on x f32 [T, H, Dh], then
// quantize_activation_fp8 of x as [T, H·Dh] into x_fp8: the attention output before wo_a's FP8
// GEMM, an FP8 producer as the FP8 section says (the bytes of the two calls, one launch on CUDA;
// the fast attention makes the same in its own launch, SparseAttentionParams::out_fp8). Dh and
// its first rope dim Dh − 2P even.
Status rope_fp8(const TensorView& x, const TensorView& positions, const TensorView& inv_freq,
                RopeDirection direction, const Fp8Activation& x_fp8);

// rms_norm of every head row of x f32 [T, H, Dh] (or [T, Dh]) over its Dh, ⊙ weight [Dh] when
// given, then rope forward, in place: the two ops in one pass, with the same numbers.
Status rms_norm_rope(const TensorView& x, const TensorView& weight, float eps,
                     const TensorView& positions, const TensorView& inv_freq);

// Attention of T queries over candidate rows picked by index from two K=V sources (the sliding
// window ring and the compressed entries), with a per-head sink logit in the denominator:
//   out[t,h] = Σ_j p_j·row_j,  p = softmax({scale·q[t,h]·row_j} ∪ {sinks[h]}) without the sink.
// Index −1 means "no candidate". The extra source may be empty (data == nullptr). Index lists
// of one row ([1, K]) serve every query. With extra_positions, the extra source is compressed
// entries in block order, causal: query t sees only its extra candidates j < (extra_positions[t]
// + 1) / extra_ratio, the blocks complete at its position (so HCA rows share one list of every
// entry, 0 … N − 1, and need no [T, N] table).
// Compressed entry j pools tokens [j·m, (j+1)·m): a query at `position` sees the entries whose
// block is complete there, of the n_entries that exist (sparse_attention's causal extra source,
// the indexer's candidate counts).
DSV4_HOST_DEVICE inline int64_t visible_entries(int64_t position, int64_t ratio,
                                                int64_t n_entries) {
  const int64_t complete = (position + 1) / ratio;
  return complete < n_entries ? complete : n_entries;
}

// Decode rows, each over its own sequence's cache (the batched decode ops below and the
// per-row sources of sparse_attention and indexer_scores): a step's B sequences keep their
// caches in allocations of their own, and an op reaches row t's buffer through an address table
// i64 [T] (the address of row t's buffer, in the operands' memory). Row t's counts follow from
// its position p (i64 [T]: the tokens its sequence held before this one), so a step runs one
// launch an op for all its sequences, uploads no count, and a table stays valid for as long as
// the batch keeps its sequences.
struct SparseAttentionParams {
  TensorView q;                // f32 [T, H, Dh]
  TensorView kv;               // f32 [N, Dh]
  TensorView indices;          // i32 [T or 1, Kw]  rows of kv
  TensorView extra_kv;         // f32 [Ne, Dh]
  TensorView extra_indices;    // i32 [T or 1, Kc]  rows of extra_kv
  TensorView sinks;            // f32 [H]
  float scale = 1.0f;          // applied to q·k (the sink logit is not scaled)
  TensorView out;              // f32 [T, H, Dh]
  // sparse_attention_bf16 only, head dims a multiple of 128: with out_fp8, the output leaves as
  // rope_fp8(out, rope_positions, rope_inv_freq, kInverse, out_fp8) would leave it (the inverse
  // RoPE of each head's last 2P dims at rope_positions i64 [T] by rope_inv_freq f32 [P], and
  // its FP8 form, [T, H·Dh] codes and scales): wo_a's input made in the attention's launch.
  Fp8Activation out_fp8{};
  TensorView rope_positions{};
  TensorView rope_inv_freq{};
  TensorView extra_positions;  // i64 [T], or empty: every extra candidate is visible
  int64_t extra_ratio = 0;     // m ≥ 1 with extra_positions or row_positions
  // Per-row sources (decode rows, above), or empty: row t's window rows are at kv_addresses[t]
  // and its extra rows at extra_addresses[t] (i64 [T] each; kv and extra_kv give their shapes
  // only), of which it holds (row_positions[t] + 1) / extra_ratio (the entries complete at its
  // position). Each row is computed exactly as a call of its row alone through tables of one row
  // would compute it (and as a plain call of its row alone, while its candidates give the GPU's
  // fast kernel at most one run of kAttentionRunCandidates an SM).
  TensorView kv_addresses{};
  TensorView extra_addresses{};
  TensorView row_positions{};  // i64 [T]
};
Status sparse_attention(const SparseAttentionParams& params);

// The fast profile's sparse attention (Numerics::kFast; DeepSeek's sparse_attn as FlashMLA runs
// it): the same contract, with q and the candidate rows rounded to bf16 (nearest even) for the
// tensor cores, q·k and Σ p·row accumulated in f32, the softmax in f32 and its unnormalised
// probabilities rounded to bf16 before they weight the rows. Head dims a multiple of 4, at most
// 512 (V4's is 512). The CPU reference evaluates the same bf16-rounded q and rows in float64
// with the probabilities unrounded: the one departure, at most 2⁻⁹ of a probability.
//
// On the GPU it splits each decode row's candidates into runs of kAttentionRunCandidates, each
// run keeping an f32 partial of 512 dims and an f32 max and sum a head in the call's scratch
// until their combine. Decode rows go through in launches whose runs take at most
// kAttentionRunsMaxBytes (each row's bits are those of a call of its row alone, so the grouping
// changes none), so the scratch stays bounded at any context and batch: an HCA layer's row at
// 2^20 positions has 8320 candidates, 34 MB of runs at 64 heads. A call whose queries read each
// row several times (a prompt's) first rounds its rows to a bf16 copy in its scratch, at most
// kAttentionCopyMaxBytes (a longer source is read as f32 rows): the same values, half the bytes.
Status sparse_attention_bf16(const SparseAttentionParams& params);
inline constexpr int64_t kAttentionRunCandidates = 32;
inline constexpr int64_t kAttentionRunsMaxBytes = int64_t{256} << 20;
inline constexpr int64_t kAttentionCopyMaxBytes = int64_t{64} << 20;
// The scratch one decode row's runs take, over n_candidates (window and extra) and n_heads.
inline int64_t attention_runs_bytes_a_row(int64_t n_candidates, int64_t n_heads) {
  const int64_t runs = n_candidates > kAttentionRunCandidates
                           ? (n_candidates + kAttentionRunCandidates - 1) / kAttentionRunCandidates
                           : 1;
  return runs * n_heads * (512 * int64_t{sizeof(float)} + 2 * int64_t{sizeof(float)});
}

// The KV compressor's gated softmax pooling. Rows are tokens of whole blocks of m = ape rows,
// row 0 at a block start; row r's gate gets ape[r mod m]; every output dim is a softmax over the
// slots of its window. HCA (overlap false): entry w pools block w (n = S/m entries at most).
// CSA (overlap true, rows [A | B]): entry w pools block w's A halves and block w+1's B halves
// (n = S/m − 1 at most); a gate of −inf gives a slot weight 0.
struct CompressorPoolParams {
  TensorView kv;         // f32 [S, c·d]
  TensorView gate;       // f32 [S, c·d]  before the position bias
  TensorView ape;        // f32 [m, c·d]
  bool overlap = false;  // c = 2 when true
  TensorView out;        // f32 [n, d]
};
Status compressor_pool(const CompressorPoolParams& params);

// Lightning-indexer scores (no Hadamard or FP4 round trip: transformers has none):
//   scores[t,n] = Σ_h (weights[t,h]·weight_scale) · (ReLU(q[t,h]·keys[n])·q_scale).
struct IndexerScoreParams {
  TensorView q;        // f32 [T, HI, DI]
  TensorView keys;     // f32 [N, DI]
  TensorView weights;  // f32 [T, HI]
  float q_scale = 1.0f;
  float weight_scale = 1.0f;
  TensorView scores;  // f32 [T, N]
  // Per-row keys (decode rows, above), or empty: row t scores the first visible_entries(
  // key_positions[t], key_ratio, N) keys at key_addresses[t] (i64 [T]; keys gives their shape
  // [N, DI] only), each as a call of its row alone would; the rest of its scores row is left
  // as it was.
  TensorView key_addresses{};
  TensorView key_positions{};  // i64 [T]
  int64_t key_ratio = 0;       // m ≥ 1 with key_addresses
};
Status indexer_scores(const IndexerScoreParams& params);

// The fast profile's indexer scores (Numerics::kFast; DeepSeek-V3.2's fp8_index, which V4's
// authors say its QAT allows): the same contract, with each query head row q[t,h] and each key
// k[n] quantized to E4M3 with one fp8_activation_scale (kernels/fp8_scale.h) of its DI ≤ 128
// values (s_q[t,h], s_k[n]), their dot products on FP8 tensor cores in f32, and
//   scores[t,n] = s_k[n] · Σ_h ReLU(q8[t,h]·k8[n]) ·
//   ((weights[t,h]·weight_scale)·(q_scale·s_q[t,h])).
// No Hadamard rotation before the quantization (the exact profile has none either). DI a
// multiple of 4, at most 128. The CPU reference quantizes identically (bit for bit) and sums in
// float64; the GPU's f32 tensor-core sums differ from it by rounding only. On the GPU a call
// whose queries share their keys (a prompt's) quantizes every key and query head row once into
// its scratch, kIndexerFp8RowBytes a row: (N + T · HI) rows.
Status indexer_scores_fp8(const IndexerScoreParams& params);
inline constexpr int64_t kIndexerFp8RowBytes = 128 + 4;  // E4M3 codes, and a scale or weight

// indices i32 [T, K] (rows may be strided) = the K largest of scores[t, 0:n_candidates[t]] in
// descending order, equal scores lower index first, −1 once the candidates run out.
// scores f32 [T, N] (rows may be strided), n_candidates i32 [T], or empty when every row's
// candidates are all N entries (a decode row: no per-step upload of its count).
Status topk(const TensorView& scores, const TensorView& n_candidates, const TensorView& indices);
// The same with row t's candidates the visible_entries(positions[t], ratio, N) entries complete
// at its position (positions i64 [T], ratio m ≥ 1): no count to upload.
Status topk(const TensorView& scores, const TensorView& positions, int64_t ratio,
            const TensorView& indices);

// ---- Decode rows' cache writes (see "Decode rows" above) ----

// Row t into its sequence's window ring: ring_t[p_t mod R] = rows[t], rows f32 [T, Dh],
// rings i64 [T] the addresses of f32 [R, Dh] rings, positions i64 [T].
Status window_write(const TensorView& rows, const TensorView& rings, int64_t n_ring_rows,
                    const TensorView& positions);

// One new token of each row's sequence into its KV compressor, as a one-token compressor step
// does it (model/compressor.cpp): the compressor of a sequence at position p keeps
// S = n_lead + p mod m projected rows (n_lead = m with overlap, else 0) and p / m entries; the
// row's projections go to row S; when that completes a block (S + 1 = n_lead + m), the rows
// [0, S] pool into entry p / m (compressor_pool), which is RMS-normed with norm_weight and turned
// by RoPE at position (p / m)·m (rms_norm_rope), and with overlap rows [m, 2m) move to [0, m).
// A sequence may have several rows (a speculative verify step's token and drafts): they stand
// consecutively at positions p, p + 1, … (a run: each row with the kv_rows address of the one
// before and the next position), and are fed in that order, each as its own one-token step.
// Rows of one buffer at one position (a decode graph's padding rows) are no run: each is fed
// from the same state, all at once, so they must carry the same values.
// Speculative decoding's undo (model/compressor_journal.h): with journals, a run that pools a
// block first writes its stream to its sequence's journal rows (f32 [J, c·d] at kv_journal[t]
// and gate_journal[t]; address 0: no journal): the S kept rows before the run, then the run's
// new rows, S + n ≤ J; a run that pools nothing leaves its journal alone (its kept rows stay).
struct CompressorDecodeParams {
  TensorView kv;           // f32 [T, c·d]  the rows' projections
  TensorView gate;         // f32 [T, c·d]
  TensorView kv_rows;      // i64 [T]  addresses of each sequence's f32 [2m, c·d] kept rows
  TensorView gate_rows;    // i64 [T]  the same for the gates
  TensorView entries;      // i64 [T]  addresses of each sequence's f32 [C, d] entries
  TensorView positions;    // i64 [T]
  TensorView ape;          // f32 [m, c·d]
  bool overlap = false;    // c = 2 when true
  TensorView norm_weight;  // f32 [d]
  float eps = 0.0f;
  TensorView inv_freq;  // f32 [P]
  TensorView kv_journal{};    // i64 [T] or empty: no journals
  TensorView gate_journal{};  // i64 [T], with kv_journal
};
Status compressor_decode(const CompressorDecodeParams& params);

// Where a decode row's token goes in its compressor (CompressorDecodeParams): row S of the kept
// rows; whether it completes a block, and the entry that block pools into.
struct CompressorDecodeSlot {
  int64_t row;    // S
  bool pools;     // S + 1 = n_lead + m
  int64_t entry;  // p / m
};
DSV4_HOST_DEVICE inline CompressorDecodeSlot compressor_decode_slot(int64_t position, int64_t ratio,
                                                                    bool overlap) {
  const int64_t n_lead = overlap ? ratio : 0;
  const int64_t row = n_lead + position % ratio;
  return {row, row + 1 == n_lead + ratio, position / ratio};
}

}  // namespace dsv4::kernels

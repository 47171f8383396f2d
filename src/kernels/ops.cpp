// The one device switch of the tree: each op checks that its tensors share a device and calls
// the CPU reference or the CUDA implementation. Ops without a CUDA implementation yet say so
// through an unimplemented Status instead of silently computing on the host.
#include "kernels/ops.h"

#include <initializer_list>
#include <string>
#include <type_traits>

#include "base/device_stream.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cuda/cuda_ops.h"

namespace dsv4::kernels {
namespace {

// The device all non-empty operands live on; mixing devices in one call is a bug.
Device device_of(std::initializer_list<const TensorView*> views) {
  const TensorView* first = nullptr;
  for (const TensorView* view : views) {
    if (view->data == nullptr) continue;
    if (first == nullptr) first = view;
    DSV4_CHECK(view->device == first->device, "operands on different devices");
  }
  return first ? first->device : Device::kCpu;
}

// The same with an FP8 weight's device among them.
Device device_of(const format::Fp8BlockView& w, std::initializer_list<const TensorView*> views) {
  const Device device = device_of(views);
  DSV4_CHECK(w.device == device, "operands on different devices");
  return device;
}

// The same for the attention ops' parameter structs (both variants of each read the same ones).
Device device_of(const SparseAttentionParams& p) {
  return device_of({&p.q, &p.kv, &p.indices, &p.extra_kv, &p.extra_indices, &p.sinks, &p.out,
                    &p.extra_positions, &p.kv_addresses, &p.extra_addresses, &p.row_positions});
}
Device device_of(const IndexerScoreParams& p) {
  return device_of({&p.q, &p.keys, &p.weights, &p.scores, &p.key_addresses, &p.key_positions});
}

Status no_cuda(const char* op) {
  return unimplemented(std::string(op) + ": no CUDA implementation yet");
}

// Whether this build has the CUDA implementations. cuda_ops.h is plain C++ and always declared;
// in a CPU-only build the calls to it sit in discarded `if constexpr` branches (of dispatch()
// below, or of the op itself), whose odr-uses need no definition.
#ifdef DSV4_WITH_CUDA
constexpr bool kCudaBuild = true;
#else
constexpr bool kCudaBuild = false;
#endif

// An op's result as a Status, for ops that return void (they check with DSV4_CHECK) and ops
// that return one.
template <typename Op>
Status run(Op& op) {
  if constexpr (std::is_void_v<decltype(op())>) {
    op();
    return ok_status();
  } else {
    return op();
  }
}

// Runs the op on the device its operands live on: cpu_op on the host, cuda_op on the GPU (an
// unimplemented Status in a build without CUDA). Either may return void or a Status.
template <typename CpuOp, typename CudaOp>
Status dispatch(const char* op, Device device, CpuOp cpu_op, CudaOp cuda_op) {
  if (device != Device::kCuda) return run(cpu_op);
  if constexpr (kCudaBuild) {
    return run(cuda_op);
  } else {
    return no_cuda(op);
  }
}

// dispatch() for the common case, an op of one name and argument list in cpu:: and cuda::. A
// macro because that name is spelled in both namespaces and as the op's name in messages.
#define DSV4_DISPATCH(op, device, ...) \
  dispatch(                            \
      #op, device, [&] { return cpu::op(__VA_ARGS__); }, [&] { return cuda::op(__VA_ARGS__); })

}  // namespace

// ---- Dense ops (f32) ----

Status linear(const TensorView& x, const TensorView& w, const TensorView& y) {
  return DSV4_DISPATCH(linear, device_of({&x, &w, &y}), x, w, y);
}

Status block_diagonal_linear(const TensorView& x, const TensorView& w, int64_t n_groups,
                             const TensorView& y) {
  return DSV4_DISPATCH(block_diagonal_linear, device_of({&x, &w, &y}), x, w, n_groups, y);
}

Status linear(const TensorView& x, const format::Fp8BlockView& w, const TensorView& y) {
  return DSV4_DISPATCH(linear, device_of(w, {&x, &y}), x, w, y);
}

Status block_diagonal_linear(const TensorView& x, const format::Fp8BlockView& w, int64_t n_groups,
                             const TensorView& y) {
  return DSV4_DISPATCH(block_diagonal_linear, device_of(w, {&x, &y}), x, w, n_groups, y);
}

Status rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& y) {
  return DSV4_DISPATCH(rms_norm, device_of({&x, &weight, &y}), x, weight, eps, y);
}

Status softmax(const TensorView& x, const TensorView& y) {
  return DSV4_DISPATCH(softmax, device_of({&x, &y}), x, y);
}

Status swiglu(const TensorView& gate_up, float limit, const TensorView& out) {
  return DSV4_DISPATCH(swiglu, device_of({&gate_up, &out}), gate_up, limit, out);
}

Status add(const TensorView& a, const TensorView& b, const TensorView& y) {
  return DSV4_DISPATCH(add, device_of({&a, &b, &y}), a, b, y);
}

Status run_beside(Device device, const std::function<Status()>& side,
                  const std::function<Status()>& main) {
  return dispatch(
      "run_beside", device,
      [&] {
        DSV4_RETURN_IF_ERROR(side());
        return main();
      },
      [&] { return run_beside_on_device(side, main); });
}

Status embedding(const TensorView& table, const TensorView& ids, const TensorView& y) {
  return DSV4_DISPATCH(embedding, device_of({&table, &ids, &y}), table, ids, y);
}

Status gather_rows(const TensorView& rows, const TensorView& y) {
  return DSV4_DISPATCH(gather_rows, device_of({&rows, &y}), rows, y);
}

Status copy_blocks(const TensorView& sources, const TensorView& destinations,
                   const TensorView& bytes) {
  return DSV4_DISPATCH(copy_blocks, device_of({&sources, &destinations, &bytes}), sources,
                       destinations, bytes);
}

// ---- Hyper-connections ----

Status hc_repeat(const TensorView& x, const TensorView& out) {
  return DSV4_DISPATCH(hc_repeat, device_of({&x, &out}), x, out);
}

Status hc_split_sinkhorn(const TensorView& mixes, const TensorView& scale, const TensorView& base,
                         int64_t n_sinkhorn_iters, float eps, const HcMix& out) {
  return DSV4_DISPATCH(hc_split_sinkhorn,
                       device_of({&mixes, &scale, &base, &out.pre, &out.post, &out.comb}), mixes,
                       scale, base, n_sinkhorn_iters, eps, out);
}

Status hc_head_weights(const TensorView& mixes, const TensorView& scale, const TensorView& base,
                       float eps, const TensorView& pre) {
  return DSV4_DISPATCH(hc_head_weights, device_of({&mixes, &scale, &base, &pre}), mixes, scale,
                       base, eps, pre);
}

Status hc_collapse(const TensorView& x, const TensorView& pre, const TensorView& y) {
  return DSV4_DISPATCH(hc_collapse, device_of({&x, &pre, &y}), x, pre, y);
}

Status hc_expand(const TensorView& f, const TensorView& f_addend, const TensorView& residual,
                 const TensorView& post, const TensorView& comb, const TensorView& out) {
  return DSV4_DISPATCH(hc_expand, device_of({&f, &f_addend, &residual, &post, &comb, &out}), f,
                       f_addend, residual, post, comb, out);
}

Status hc_pre_norm(const HcPreNormParams& p) {
  return DSV4_DISPATCH(hc_pre_norm,
                       device_of({&p.mixes, &p.scale, &p.base, &p.mix.pre, &p.mix.post, &p.mix.comb,
                                  &p.streams, &p.norm_weight, &p.y}),
                       p);
}

Status hc_expand_norm(const TensorView& f, const TensorView& f_addend, const TensorView& residual,
                      const TensorView& post, const TensorView& comb, float eps,
                      const TensorView& out, const TensorView& normed) {
  return DSV4_DISPATCH(hc_expand_norm,
                       device_of({&f, &f_addend, &residual, &post, &comb, &out, &normed}), f,
                       f_addend, residual, post, comb, eps, out, normed);
}

// ---- MoE routing and expert dispatch ----

Status moe_route(const TensorView& logits, const TensorView& bias, const TensorView& hash_ids,
                 float route_scale, const MoeRouting& out) {
  return DSV4_DISPATCH(moe_route, device_of({&logits, &bias, &hash_ids, &out.weights, &out.ids}),
                       logits, bias, hash_ids, route_scale, out);
}

Status moe_group(const TensorView& ids, const TensorView& order, const TensorView& offsets) {
  return DSV4_DISPATCH(moe_group, device_of({&ids, &order, &offsets}), ids, order, offsets);
}

Status moe_gather(const TensorView& x, const TensorView& order, const TensorView& y) {
  return DSV4_DISPATCH(moe_gather, device_of({&x, &order, &y}), x, order, y);
}

Status moe_combine(const TensorView& expert_out, const TensorView& order, const TensorView& weights,
                   const TensorView& out) {
  return DSV4_DISPATCH(moe_combine, device_of({&expert_out, &order, &weights, &out}), expert_out,
                       order, weights, out);
}

Status grouped_linear(const TensorView& x, const TensorView& w, const TensorView& offsets,
                      const TensorView& y) {
  return DSV4_DISPATCH(grouped_linear, device_of({&x, &w, &offsets, &y}), x, w, offsets, y);
}

// ---- NVFP4 ----

namespace {

Device nvfp4_device(const StagedActivation* a, const TensorView* x, const format::Nvfp4View& b,
                    const TensorView* offsets, const TensorView& d) {
  const TensorView empty;
  const TensorView* a_packed = a ? &a->packed : &empty;
  const TensorView* a_scale = a ? &a->block_scale : &empty;
  const TensorView* a_global = a ? &a->global_scale : &empty;
  return device_of({a_packed, a_scale, a_global, x ? x : &empty, &b.packed, &b.block_scale,
                    &b.global_scale, offsets ? offsets : &empty, &d});
}

}  // namespace

Status stage_activation(const TensorView& x, const TensorView& input_scale,
                        const StagedActivation& out) {
  return DSV4_DISPATCH(
      stage_activation,
      device_of({&x, &input_scale, &out.packed, &out.block_scale, &out.global_scale}), x,
      input_scale, out);
}

// ---- FP8 ----

Status quantize_activation_fp8(const TensorView& x, const Fp8Activation& out) {
  return DSV4_DISPATCH(quantize_activation_fp8, device_of({&x, &out.values, &out.scales}), x, out);
}

namespace {

// The device of an FP8 GEMM's operands (w's too, where it has values).
Device fp8_gemm_device(const Fp8Activation& a, const format::Fp8BlockView& w, const TensorView& y,
                       const char* what) {
  const Device device = device_of({&a.values, &a.scales, &y});
  DSV4_CHECK(w.values == nullptr || w.device == device, "%s: w on another device", what);
  return device;
}

}  // namespace

Status linear_fp8(const Fp8Activation& a, const format::Fp8BlockView& w, const TensorView& y) {
  return DSV4_DISPATCH(linear_fp8, fp8_gemm_device(a, w, y, "linear_fp8"), a, w, y);
}

Status block_diagonal_linear_fp8(const Fp8Activation& a, const format::Fp8BlockView& w,
                                 int64_t n_groups, const TensorView& y) {
  return DSV4_DISPATCH(block_diagonal_linear_fp8,
                       fp8_gemm_device(a, w, y, "block_diagonal_linear_fp8"), a, w, n_groups, y);
}

Status linear_fp8(const TensorView& x, const format::Fp8BlockView& w, const Fp8Activation& scratch,
                  const TensorView& y) {
  DSV4_RETURN_IF_ERROR(quantize_activation_fp8(x, scratch));
  return linear_fp8(scratch, w, y);
}

Status rms_norm_fp8(const TensorView& x, const TensorView& weight, float eps, const TensorView& y,
                    const Fp8Activation& y_fp8) {
  return DSV4_DISPATCH(rms_norm_fp8, device_of({&x, &weight, &y, &y_fp8.values, &y_fp8.scales}), x,
                       weight, eps, y, y_fp8);
}

Status swiglu_fp8(const TensorView& gate_up, float limit, const TensorView& out,
                  const Fp8Activation& out_fp8) {
  return DSV4_DISPATCH(swiglu_fp8, device_of({&gate_up, &out, &out_fp8.values, &out_fp8.scales}),
                       gate_up, limit, out, out_fp8);
}

Status hc_pre_norm_fp8(const HcPreNormParams& p, const Fp8Activation& y_fp8) {
  return DSV4_DISPATCH(hc_pre_norm_fp8,
                       device_of({&p.mixes, &p.scale, &p.base, &p.mix.pre, &p.mix.post, &p.mix.comb,
                                  &p.streams, &p.norm_weight, &p.y, &y_fp8.values, &y_fp8.scales}),
                       p, y_fp8);
}

Status rope_fp8(const TensorView& x, const TensorView& positions, const TensorView& inv_freq,
                RopeDirection direction, const Fp8Activation& x_fp8) {
  return DSV4_DISPATCH(rope_fp8,
                       device_of({&x, &positions, &inv_freq, &x_fp8.values, &x_fp8.scales}), x,
                       positions, inv_freq, direction, x_fp8);
}

Status nvfp4_gemm(const StagedActivation& a, const format::Nvfp4View& b, const TensorView& d) {
  return DSV4_DISPATCH(nvfp4_gemm, nvfp4_device(&a, nullptr, b, nullptr, d), a, b, d);
}

Status nvfp4_gemm(const TensorView& a, const format::Nvfp4View& b, const TensorView& d) {
  return DSV4_DISPATCH(nvfp4_gemm, nvfp4_device(nullptr, &a, b, nullptr, d), a, b, d);
}

Status nvfp4_grouped_gemm(const StagedActivation& a, const format::Nvfp4View& b,
                          const TensorView& group_offsets, const TensorView& d) {
  return DSV4_DISPATCH(nvfp4_grouped_gemm, nvfp4_device(&a, nullptr, b, &group_offsets, d), a, b,
                       group_offsets, d);
}

Status nvfp4_grouped_gemm(const TensorView& a, const format::Nvfp4View& b,
                          const TensorView& group_offsets, const TensorView& d) {
  return DSV4_DISPATCH(nvfp4_grouped_gemm, nvfp4_device(nullptr, &a, b, &group_offsets, d), a, b,
                       group_offsets, d);
}

// ---- Attention ----

Status rms_norm_rope(const TensorView& x, const TensorView& weight, float eps,
                     const TensorView& positions, const TensorView& inv_freq) {
  return DSV4_DISPATCH(rms_norm_rope, device_of({&x, &weight, &positions, &inv_freq}), x, weight,
                       eps, positions, inv_freq);
}

Status rope(const TensorView& x, const TensorView& positions, const TensorView& inv_freq,
            RopeDirection direction) {
  return DSV4_DISPATCH(rope, device_of({&x, &positions, &inv_freq}), x, positions, inv_freq,
                       direction);
}

Status sparse_attention(const SparseAttentionParams& p) {
  return DSV4_DISPATCH(sparse_attention, device_of(p), p);
}

Status sparse_attention_bf16(const SparseAttentionParams& p) {
  return DSV4_DISPATCH(sparse_attention_bf16, device_of(p), p);
}

Status compressor_pool(const CompressorPoolParams& p) {
  return DSV4_DISPATCH(compressor_pool, device_of({&p.kv, &p.gate, &p.ape, &p.out}), p);
}

Status indexer_scores(const IndexerScoreParams& p) {
  return DSV4_DISPATCH(indexer_scores, device_of(p), p);
}

Status indexer_scores_fp8(const IndexerScoreParams& p) {
  return DSV4_DISPATCH(indexer_scores_fp8, device_of(p), p);
}

Status topk(const TensorView& scores, const TensorView& n_candidates, const TensorView& indices) {
  return DSV4_DISPATCH(topk, device_of({&scores, &n_candidates, &indices}), scores, n_candidates,
                       indices);
}

Status topk(const TensorView& scores, const TensorView& positions, int64_t ratio,
            const TensorView& indices) {
  return DSV4_DISPATCH(topk, device_of({&scores, &positions, &indices}), scores, positions, ratio,
                       indices);
}

// ---- Decode rows' cache writes ----

Status window_write(const TensorView& rows, const TensorView& rings, int64_t n_ring_rows,
                    const TensorView& positions) {
  return DSV4_DISPATCH(window_write, device_of({&rows, &rings, &positions}), rows, rings,
                       n_ring_rows, positions);
}

Status compressor_decode(const CompressorDecodeParams& p) {
  return DSV4_DISPATCH(compressor_decode,
                       device_of({&p.kv, &p.gate, &p.kv_rows, &p.gate_rows, &p.entries,
                                  &p.positions, &p.ape, &p.norm_weight, &p.inv_freq,
                                  &p.kv_journal, &p.gate_journal}),
                       p);
}

// ---- MoE ----

int64_t moe_ffn_workspace_bytes(int64_t n_tokens, const MoeWeightsView& w, const MoeConfig& cfg) {
  if constexpr (kCudaBuild) return cuda::moe_ffn_workspace_bytes(n_tokens, w, cfg);
  return 0;  // the CPU version allocates its own scratch
}

Status copy_touched_experts(const TensorView& active, const ExpertBulkCopies& from,
                            const ExpertBulkCopies& to) {
  return DSV4_DISPATCH(copy_touched_experts,
                       device_of({&active, &from.w13_packed, &from.w13_block_scale, &from.w2_packed,
                                  &from.w2_block_scale, &to.w13_packed, &to.w13_block_scale,
                                  &to.w2_packed, &to.w2_block_scale}),
                       active, from, to);
}

Status moe_ffn(const TensorView& x, const TensorView& token_ids, const MoeWeightsView& w,
               const MoeConfig& cfg, const TensorView& workspace, const TensorView& y) {
  return dispatch(
      "moe_ffn",
      device_of({&x, &token_ids, &w.gate, &w.bias, &w.tid2eid, &w.w13.packed, &w.w2.packed,
                 &w.shared_w13.packed, &w.shared_w2.packed, &w.w13_input_scale, &w.w2_input_scale,
                 &w.touched_copies.w13_packed, &w.touched_copies.w13_block_scale,
                 &w.touched_copies.w2_packed, &w.touched_copies.w2_block_scale, &workspace, &y}),
      [&] { cpu::moe_ffn(x, token_ids, w, cfg, y); },
      [&] { return cuda::moe_ffn(x, token_ids, w, cfg, workspace, y); });
}

}  // namespace dsv4::kernels

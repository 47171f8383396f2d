// The one device switch of the tree: each op checks that its tensors share a device and calls
// the CPU reference or the CUDA implementation. Ops without a CUDA implementation yet say so
// through an unimplemented Status instead of silently computing on the host.
#include "kernels/ops.h"

#include <initializer_list>
#include <string>

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

Status no_cuda(const char* op) {
  return unimplemented(std::string(op) + ": no CUDA implementation yet");
}

// Whether this build has the CUDA implementations. cuda_ops.h is plain C++ and always declared;
// in a CPU-only build the calls to it sit in discarded `if constexpr` branches, which need no
// definition.
#ifdef DSV4_WITH_CUDA
constexpr bool kCudaBuild = true;
#else
constexpr bool kCudaBuild = false;
#endif

}  // namespace

// ---- Dense ops (f32) ----

Status linear(const TensorView& x, const TensorView& w, const TensorView& y) {
  if (device_of({&x, &w, &y}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("linear");
    else cuda::linear(x, w, y);
  } else {
    cpu::linear(x, w, y);
  }
  return ok_status();
}

Status rms_norm(const TensorView& x, const TensorView& weight, float eps, const TensorView& y) {
  if (device_of({&x, &weight, &y}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("rms_norm");
    else cuda::rms_norm(x, weight, eps, y);
  } else {
    cpu::rms_norm(x, weight, eps, y);
  }
  return ok_status();
}

Status softmax(const TensorView& x, const TensorView& y) {
  if (device_of({&x, &y}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("softmax");
    else cuda::softmax(x, y);
  } else {
    cpu::softmax(x, y);
  }
  return ok_status();
}

Status swiglu(const TensorView& gate_up, float limit, const TensorView& out) {
  if (device_of({&gate_up, &out}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("swiglu");
    else cuda::swiglu(gate_up, limit, out);
  } else {
    cpu::swiglu(gate_up, limit, out);
  }
  return ok_status();
}

Status add(const TensorView& a, const TensorView& b, const TensorView& y) {
  if (device_of({&a, &b, &y}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("add");
    else cuda::add(a, b, y);
  } else {
    cpu::add(a, b, y);
  }
  return ok_status();
}

Status embedding(const TensorView& table, const TensorView& ids, const TensorView& y) {
  if (device_of({&table, &ids, &y}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("embedding");
    else cuda::embedding(table, ids, y);
  } else {
    cpu::embedding(table, ids, y);
  }
  return ok_status();
}

// ---- Hyper-connections ----

Status hc_repeat(const TensorView& x, const TensorView& out) {
  if (device_of({&x, &out}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("hc_repeat");
    else cuda::hc_repeat(x, out);
  } else {
    cpu::hc_repeat(x, out);
  }
  return ok_status();
}

Status hc_split_sinkhorn(const TensorView& mixes, const TensorView& scale, const TensorView& base,
                         int64_t n_sinkhorn_iters, float eps, const HcMix& out) {
  if (device_of({&mixes, &scale, &base, &out.pre, &out.post, &out.comb}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("hc_split_sinkhorn");
    else cuda::hc_split_sinkhorn(mixes, scale, base, n_sinkhorn_iters, eps, out);
  } else {
    cpu::hc_split_sinkhorn(mixes, scale, base, n_sinkhorn_iters, eps, out);
  }
  return ok_status();
}

Status hc_head_weights(const TensorView& mixes, const TensorView& scale, const TensorView& base,
                       float eps, const TensorView& pre) {
  if (device_of({&mixes, &scale, &base, &pre}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("hc_head_weights");
    else cuda::hc_head_weights(mixes, scale, base, eps, pre);
  } else {
    cpu::hc_head_weights(mixes, scale, base, eps, pre);
  }
  return ok_status();
}

Status hc_collapse(const TensorView& x, const TensorView& pre, const TensorView& y) {
  if (device_of({&x, &pre, &y}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("hc_collapse");
    else cuda::hc_collapse(x, pre, y);
  } else {
    cpu::hc_collapse(x, pre, y);
  }
  return ok_status();
}

Status hc_expand(const TensorView& f, const TensorView& residual, const TensorView& post,
                 const TensorView& comb, const TensorView& out) {
  if (device_of({&f, &residual, &post, &comb, &out}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("hc_expand");
    else cuda::hc_expand(f, residual, post, comb, out);
  } else {
    cpu::hc_expand(f, residual, post, comb, out);
  }
  return ok_status();
}

// ---- MoE routing and expert dispatch ----

Status moe_route(const TensorView& logits, const TensorView& bias, const TensorView& hash_ids,
                 float route_scale, const MoeRouting& out) {
  if (device_of({&logits, &bias, &hash_ids, &out.weights, &out.ids}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("moe_route");
    else cuda::moe_route(logits, bias, hash_ids, route_scale, out);
  } else {
    cpu::moe_route(logits, bias, hash_ids, route_scale, out);
  }
  return ok_status();
}

Status moe_group(const TensorView& ids, const TensorView& order, const TensorView& offsets) {
  if (device_of({&ids, &order, &offsets}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("moe_group");
    else cuda::moe_group(ids, order, offsets);
  } else {
    cpu::moe_group(ids, order, offsets);
  }
  return ok_status();
}

Status moe_gather(const TensorView& x, const TensorView& order, const TensorView& y) {
  if (device_of({&x, &order, &y}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("moe_gather");
    else cuda::moe_gather(x, order, y);
  } else {
    cpu::moe_gather(x, order, y);
  }
  return ok_status();
}

Status moe_combine(const TensorView& expert_out, const TensorView& order,
                   const TensorView& weights, const TensorView& out) {
  if (device_of({&expert_out, &order, &weights, &out}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("moe_combine");
    else cuda::moe_combine(expert_out, order, weights, out);
  } else {
    cpu::moe_combine(expert_out, order, weights, out);
  }
  return ok_status();
}

Status grouped_linear(const TensorView& x, const TensorView& w, const TensorView& offsets,
                      const TensorView& y) {
  if (device_of({&x, &w, &offsets, &y}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("grouped_linear");
    else cuda::grouped_linear(x, w, offsets, y);
  } else {
    cpu::grouped_linear(x, w, offsets, y);
  }
  return ok_status();
}

// ---- NVFP4 ----
// The CUDA branch returns unimplemented until kernels/cuda defines the cuda_ops.h functions.

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
  if (device_of({&x, &input_scale, &out.packed, &out.block_scale, &out.global_scale}) ==
      Device::kCuda) {
#ifdef DSV4_WITH_CUDA
    return cuda::stage_activation(x, input_scale, out);
#else
    return no_cuda("stage_activation");
#endif
  }
  cpu::stage_activation(x, input_scale, out);
  return ok_status();
}

Status nvfp4_gemm(const StagedActivation& a, const format::Nvfp4View& b, const TensorView& d) {
  if (nvfp4_device(&a, nullptr, b, nullptr, d) == Device::kCuda) {
#ifdef DSV4_WITH_CUDA
    return cuda::nvfp4_gemm(a, b, d);
#else
    return no_cuda("nvfp4_gemm");
#endif
  }
  cpu::nvfp4_gemm(a, b, d);
  return ok_status();
}

Status nvfp4_gemm(const TensorView& a, const format::Nvfp4View& b, const TensorView& d) {
  if (nvfp4_device(nullptr, &a, b, nullptr, d) == Device::kCuda) {
#ifdef DSV4_WITH_CUDA
    return cuda::nvfp4_gemm(a, b, d);
#else
    return no_cuda("nvfp4_gemm");
#endif
  }
  cpu::nvfp4_gemm(a, b, d);
  return ok_status();
}

Status nvfp4_grouped_gemm(const StagedActivation& a, const format::Nvfp4View& b,
                          const TensorView& group_offsets, const TensorView& d) {
  if (nvfp4_device(&a, nullptr, b, &group_offsets, d) == Device::kCuda) {
#ifdef DSV4_WITH_CUDA
    return cuda::nvfp4_grouped_gemm(a, b, group_offsets, d);
#else
    return no_cuda("nvfp4_grouped_gemm");
#endif
  }
  cpu::nvfp4_grouped_gemm(a, b, group_offsets, d);
  return ok_status();
}

Status nvfp4_grouped_gemm(const TensorView& a, const format::Nvfp4View& b,
                          const TensorView& group_offsets, const TensorView& d) {
  if (nvfp4_device(nullptr, &a, b, &group_offsets, d) == Device::kCuda) {
#ifdef DSV4_WITH_CUDA
    return cuda::nvfp4_grouped_gemm(a, b, group_offsets, d);
#else
    return no_cuda("nvfp4_grouped_gemm");
#endif
  }
  cpu::nvfp4_grouped_gemm(a, b, group_offsets, d);
  return ok_status();
}

// ---- Attention ----

Status rope(const TensorView& x, const TensorView& positions, const TensorView& inv_freq,
            RopeDirection direction) {
  if (device_of({&x, &positions, &inv_freq}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("rope");
    else cuda::rope(x, positions, inv_freq, direction);
  } else {
    cpu::rope(x, positions, inv_freq, direction);
  }
  return ok_status();
}

Status sparse_attention(const SparseAttentionParams& p) {
  if (device_of({&p.q, &p.kv, &p.indices, &p.extra_kv, &p.extra_indices, &p.sinks, &p.out}) ==
      Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("sparse_attention");
    else cuda::sparse_attention(p);
  } else {
    cpu::sparse_attention(p);
  }
  return ok_status();
}

Status compressor_pool(const CompressorPoolParams& p) {
  if (device_of({&p.kv, &p.gate, &p.ape, &p.out}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("compressor_pool");
    else cuda::compressor_pool(p);
  } else {
    cpu::compressor_pool(p);
  }
  return ok_status();
}

Status indexer_scores(const IndexerScoreParams& p) {
  if (device_of({&p.q, &p.keys, &p.weights, &p.scores}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("indexer_scores");
    else cuda::indexer_scores(p);
  } else {
    cpu::indexer_scores(p);
  }
  return ok_status();
}

Status topk(const TensorView& scores, const TensorView& n_candidates, const TensorView& indices) {
  if (device_of({&scores, &n_candidates, &indices}) == Device::kCuda) {
    if constexpr (!kCudaBuild) return no_cuda("topk");
    else cuda::topk(scores, n_candidates, indices);
  } else {
    cpu::topk(scores, n_candidates, indices);
  }
  return ok_status();
}

// ---- MoE ----

int64_t moe_ffn_workspace_bytes(int64_t n_tokens, const MoeWeightsView& w, const MoeConfig& cfg) {
#ifdef DSV4_WITH_CUDA
  return cuda::moe_ffn_workspace_bytes(n_tokens, w, cfg);
#else
  (void)n_tokens, (void)w, (void)cfg;
  return 0;
#endif
}

Status moe_ffn(const TensorView& x, const TensorView& token_ids, const MoeWeightsView& w,
               const MoeConfig& cfg, const TensorView& workspace, const TensorView& y) {
  if (device_of({&x, &token_ids, &w.gate, &w.bias, &w.tid2eid, &w.w13.packed, &w.w2.packed,
                 &w.shared_w13.packed, &w.shared_w2.packed, &w.w13_input_scale,
                 &w.w2_input_scale, &workspace, &y}) == Device::kCuda) {
#ifdef DSV4_WITH_CUDA
    return cuda::moe_ffn(x, token_ids, w, cfg, workspace, y);
#else
    return no_cuda("moe_ffn");
#endif
  }
  cpu::moe_ffn(x, token_ids, w, cfg, y);
  return ok_status();
}

}  // namespace dsv4::kernels

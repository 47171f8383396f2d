// The fused MoE block (kernels/ops.h moe_ffn) on the CPU: the reference the CUDA pipeline
// (kernels/cuda/moe/) is tested against, written only as the composition of the plain CPU ops:
// linear (router logits), moe_route, moe_group, copy_touched_experts (expert offload's copies),
// moe_gather, stage_activation, the NVFP4 reference GEMMs, swiglu, moe_combine and add.
//
// Dimension letters: T tokens, D model width, E routed experts, K experts per token, F expert
// width, R = T·K routed rows (sorted by expert), S = R + T rows incl. the shared expert's.
#include <algorithm>

#include "base/buffer.h"
#include "base/float_convert.h"
#include "kernels/cpu/cpu_ops.h"

namespace dsv4::kernels::cpu {
namespace {

// An activation as the GEMMs read it: NVFP4 rows (W4A4) or bf16-rounded f32 rows (W4A16).
struct Staged {
  Tensor values;  // f32 [S, K] (W4A16)
  Tensor packed, block_scale, global_scale;
  StagedActivation view() const {
    return StagedActivation{packed.view(), block_scale.view(), global_scale.view()};
  }
  StagedActivation rows(int64_t begin, int64_t end) const {
    return StagedActivation{packed.view().rows(begin, end), block_scale.view().rows(begin, end),
                            global_scale.view()};
  }
};

// input_scale: W4A4's static decode scale f32 [1], or empty for the dynamic one.
Staged stage(const Tensor& x, MoeMode mode, const TensorView& input_scale) {
  const int64_t n_rows = x.shape()[0], n_cols = x.shape()[1];
  Staged s;
  if (mode == MoeMode::kW4A16) {
    s.values = Tensor::host(DType::kF32, {n_rows, n_cols});
    for (int64_t i = 0; i < n_rows * n_cols; ++i) {
      s.values.data_as<float>()[i] = round_to_bf16(x.data_as<const float>()[i]);
    }
    return s;
  }
  s.packed = Tensor::host(DType::kU8, {n_rows, n_cols / 2});
  s.block_scale = Tensor::host(DType::kU8, {n_rows, n_cols / format::kNvfp4BlockSize});
  s.global_scale = Tensor::host(DType::kF32, {1});
  cpu::stage_activation(x.view(), input_scale, s.view());
  return s;
}

// d rows [begin, end) = a rows [begin, end) through the grouped (routed) or plain (shared) GEMM.
void expert_gemm(const Staged& a, MoeMode mode, int64_t begin, int64_t end,
                 const format::Nvfp4View& b, const TensorView* offsets, const TensorView& d) {
  const TensorView out = d.rows(begin, end);
  if (mode == MoeMode::kW4A16) {
    const TensorView in = a.values.view().rows(begin, end);
    offsets ? cpu::nvfp4_grouped_gemm(in, b, *offsets, out) : cpu::nvfp4_gemm(in, b, out);
  } else {
    const StagedActivation in = a.rows(begin, end);
    offsets ? cpu::nvfp4_grouped_gemm(in, b, *offsets, out) : cpu::nvfp4_gemm(in, b, out);
  }
}

// The experts with rows in `offsets` (i32 [E+1]) as copy_touched_experts' list: i32 [E+2], the
// experts in order, their count at [E+1].
Tensor touched_experts(const TensorView& offsets) {
  const int64_t n_experts = offsets.numel() - 1;
  Tensor active = Tensor::host(DType::kI32, {n_experts + 2});
  const int32_t* off = offsets.data_as<const int32_t>();
  int32_t* list = active.data_as<int32_t>();
  int32_t n_active = 0;
  for (int64_t e = 0; e < n_experts; ++e) {
    if (off[e + 1] > off[e]) list[n_active++] = static_cast<int32_t>(e);
  }
  list[n_experts + 1] = n_active;
  return active;
}

}  // namespace

void moe_ffn(const TensorView& x, const TensorView& token_ids, const MoeWeightsView& w,
             const MoeConfig& cfg, const TensorView& y) {
  const int64_t n_tokens = x.size(0), dim = x.size(1), n_experts = w.gate.size(0);
  const int64_t k_used = cfg.n_expert_used, ffn = w.w2.n_cols();
  const int64_t n_routed = n_tokens * k_used, n_rows = n_routed + (w.has_shared() ? n_tokens : 0);
  DSV4_CHECK(x.dtype == DType::kF32 && x.is_contiguous() && y.shape == x.shape,
             "moe_ffn: x, y must be f32 [T, D]");

  Tensor logits = Tensor::host(DType::kF32, {n_tokens, n_experts});
  cpu::linear(x, w.gate, logits.view());
  Tensor hash_ids;  // i64 [T, K] = tid2eid[token_ids]
  if (w.tid2eid.data != nullptr) {
    hash_ids = Tensor::host(DType::kI64, {n_tokens, k_used});
    for (int64_t t = 0; t < n_tokens; ++t) {
      std::copy_n(
          w.tid2eid.data_as<const int64_t>() + token_ids.data_as<const int64_t>()[t] * k_used,
          k_used, hash_ids.data_as<int64_t>() + t * k_used);
    }
  }
  Tensor weights = Tensor::host(DType::kF32, {n_tokens, k_used});
  Tensor ids = Tensor::host(DType::kI32, {n_tokens, k_used});
  cpu::moe_route(logits.view(), w.bias, hash_ids.view(), cfg.routed_scaling_factor,
                 MoeRouting{weights.view(), ids.view()});
  Tensor order = Tensor::host(DType::kI32, {n_routed});
  Tensor offsets = Tensor::host(DType::kI32, {n_experts + 1});
  cpu::moe_group(ids.view(), order.view(), offsets.view());
  if (!w.touched_copies.empty()) {
    cpu::copy_touched_experts(touched_experts(offsets.view()).view(), w.routed_bulk(),
                              w.touched_copies);
  }
  const MoeWeightsView read = w.as_read();  // the routed stacks the GEMMs read

  // Rows [0, R): the routed (token, slot) pairs by expert; rows [R, S): x for the shared expert.
  // Staging them together equals staging x: the same values, so the same amax.
  Tensor x_rows = Tensor::host(DType::kF32, {n_rows, dim});
  cpu::moe_gather(x, order.view(), x_rows.view().rows(0, n_routed));
  if (w.has_shared()) {
    std::copy_n(x.data_as<const float>(), n_tokens * dim, x_rows.data_as<float>() + n_routed * dim);
  }
  const TensorView offsets_view = offsets.view();
  // The shared expert's rows [R, S), when the op has one.
  auto shared_gemm = [&](const Staged& a, const format::Nvfp4View& b, const TensorView& d) {
    if (w.has_shared()) expert_gemm(a, cfg.mode, n_routed, n_rows, b, nullptr, d);
  };
  const Staged a1 = stage(x_rows, cfg.mode, w.w13_input_scale);
  Tensor gate_up = Tensor::host(DType::kF32, {n_rows, 2 * ffn});
  expert_gemm(a1, cfg.mode, 0, n_routed, read.w13, &offsets_view, gate_up.view());
  shared_gemm(a1, w.shared_w13, gate_up.view());
  Tensor act = Tensor::host(DType::kF32, {n_rows, ffn});
  cpu::swiglu(gate_up.view(), cfg.swiglu_limit, act.view());
  const Staged a2 = stage(act, cfg.mode, w.w2_input_scale);  // one scale over all the rows
  Tensor down = Tensor::host(DType::kF32, {n_rows, dim});
  expert_gemm(a2, cfg.mode, 0, n_routed, read.w2, &offsets_view, down.view());
  shared_gemm(a2, w.shared_w2, down.view());
  cpu::moe_combine(down.view().rows(0, n_routed), order.view(), weights.view(), y);
  if (w.has_shared()) cpu::add(y, down.view().rows(n_routed, n_rows), y);
}

}  // namespace dsv4::kernels::cpu

#include "kernels/ep/moe_pieces.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace dsv4::kernels::ep {
namespace {

using format::kNvfp4BlockSize;

format::Nvfp4View slice_view(const format::Nvfp4View& v, int64_t first, int64_t count) {
  return format::Nvfp4View{v.packed.rows(first, first + count),
                           v.block_scale.rows(first, first + count),
                           v.global_scale.rows(first, first + count), v.scale_layout};
}
}  // namespace

Result<StagedBuffer> StagedBuffer::create(int64_t n_rows, int64_t n_cols) {
  StagedBuffer b;
  DSV4_ASSIGN_OR_RETURN(b.packed, Tensor::empty(DType::kU8, {n_rows, n_cols / 2}));
  DSV4_ASSIGN_OR_RETURN(b.block_scale,
                        Tensor::empty(DType::kU8, {n_rows, n_cols / kNvfp4BlockSize}));
  DSV4_ASSIGN_OR_RETURN(b.global_scale, Tensor::empty(DType::kF32, {1}));
  return b;
}

Result<TokenRouting> route_tokens(const TensorView& x, const TensorView& token_ids,
                                  const MoeWeightsView& w, const MoeConfig& cfg) {
  const int64_t n_tokens = x.size(0), n_experts = w.gate.size(0), k = cfg.n_expert_used;
  TokenRouting r;
  DSV4_ASSIGN_OR_RETURN(Tensor logits, Tensor::empty(DType::kF32, {n_tokens, n_experts}));
  DSV4_RETURN_IF_ERROR(linear(x, w.gate, logits.view()));
  Tensor hash_ids;  // i64 [T, K] = tid2eid[token_ids]
  if (w.tid2eid.data != nullptr) {
    DSV4_ASSIGN_OR_RETURN(hash_ids, Tensor::empty(DType::kI64, {n_tokens, k}));
    for (int64_t t = 0; t < n_tokens; ++t) {
      const int64_t id = token_ids.data_as<const int64_t>()[t];
      std::copy_n(w.tid2eid.data_as<const int64_t>() + id * k, k,
                  hash_ids.data_as<int64_t>() + t * k);
    }
  }
  DSV4_ASSIGN_OR_RETURN(r.weights, Tensor::empty(DType::kF32, {n_tokens, k}));
  DSV4_ASSIGN_OR_RETURN(r.ids, Tensor::empty(DType::kI32, {n_tokens, k}));
  DSV4_ASSIGN_OR_RETURN(r.order, Tensor::empty(DType::kI32, {n_tokens * k}));
  DSV4_ASSIGN_OR_RETURN(r.offsets, Tensor::empty(DType::kI32, {n_experts + 1}));
  DSV4_RETURN_IF_ERROR(
      moe_route(logits.view(), w.bias, hash_ids.view(), cfg.routed_scaling_factor, r.view()));
  DSV4_RETURN_IF_ERROR(moe_group(r.ids.view(), r.order.view(), r.offsets.view()));
  return r;
}

MoeWeightsView slice_experts(const MoeWeightsView& w, int64_t first, int64_t count) {
  MoeWeightsView s = w;
  s.w13 = slice_view(w.w13, first, count);
  s.w2 = slice_view(w.w2, first, count);
  return s;
}

format::Nvfp4View shard_as_stack(const format::Nvfp4View& shard, int64_t first, int64_t n_experts) {
  DSV4_CHECK(first >= 0 && first + shard.n_matrices() <= n_experts,
             "shard_as_stack: experts [%lld, %lld) of %lld", (long long)first,
             (long long)(first + shard.n_matrices()), (long long)n_experts);
  // Address arithmetic, not pointer arithmetic: the start lies outside the copy's allocation.
  const auto widened = [&](const TensorView& v) {
    TensorView stack = v;
    const auto before = static_cast<uintptr_t>(first * v.stride[0]) * dtype_size(v.dtype);
    stack.data = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(v.data) - before);
    stack.shape[0] = n_experts;
    return stack;
  };
  return format::Nvfp4View{widened(shard.packed), widened(shard.block_scale),
                           widened(shard.global_scale), shard.scale_layout};
}

float activation_amax(const TensorView& x) {
  DSV4_CHECK(x.dtype == DType::kF32 && x.is_contiguous(), "activation_amax: f32 contiguous");
  return x.numel() == 0 ? 0.0f : format::amax_abs(x.data_as<const float>(), x.numel());
}

Status stage_with_amax(const TensorView& x, float amax, const StagedActivation& out) {
  // stage_activation's static path with decode = from_amax(amax).decode runs the same fp32
  // operations as its dynamic path with that amax: encode = 1 / decode either way.
  float decode = format::GlobalScale::from_amax(amax).decode;
  const TensorView scale = TensorView::contiguous(&decode, DType::kF32, Device::kCpu, {1});
  return stage_activation(x, scale, out);
}

void gather_staged_rows(const StagedActivation& src, const int32_t* index,
                        const StagedActivation& dst) {
  DSV4_CHECK(src.scale_layout == format::ScaleLayout::kLinear &&
                 dst.scale_layout == format::ScaleLayout::kLinear &&
                 src.packed.size(1) == dst.packed.size(1),
             "gather_staged_rows: linear scales, equal K");
  const int64_t n_rows = dst.packed.size(0), packed_bytes = dst.packed.size(1);
  const int64_t scale_bytes = packed_bytes * 2 / kNvfp4BlockSize;
  for (int64_t r = 0; r < n_rows; ++r) {
    DSV4_CHECK(0 <= index[r] && index[r] < src.packed.size(0), "gather row %d of %lld", index[r],
               (long long)src.packed.size(0));
    std::memcpy(dst.packed.data_as<uint8_t>() + r * packed_bytes,
                src.packed.data_as<const uint8_t>() + index[r] * packed_bytes, packed_bytes);
    std::memcpy(dst.block_scale.data_as<uint8_t>() + r * scale_bytes,
                src.block_scale.data_as<const uint8_t>() + index[r] * scale_bytes, scale_bytes);
  }
  *dst.global_scale.data_as<float>() = *src.global_scale.data_as<const float>();
}

Status expert_gate_up(const StagedActivation& rows, const format::Nvfp4View& w13,
                      const TensorView& offsets, float swiglu_limit, const TensorView& gate_up,
                      const TensorView& act) {
  DSV4_RETURN_IF_ERROR(offsets.data ? nvfp4_grouped_gemm(rows, w13, offsets, gate_up)
                                    : nvfp4_gemm(rows, w13, gate_up));
  return swiglu(gate_up, swiglu_limit, act);
}

Status expert_down(const StagedActivation& act_staged, const format::Nvfp4View& w2,
                   const TensorView& offsets, const TensorView& out) {
  return offsets.data ? nvfp4_grouped_gemm(act_staged, w2, offsets, out)
                      : nvfp4_gemm(act_staged, w2, out);
}

}  // namespace dsv4::kernels::ep

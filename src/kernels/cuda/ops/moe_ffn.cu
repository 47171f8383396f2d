// cuda::moe_ffn: the MoE block as a fixed chain of launches on one stream, no host
// synchronisation and no allocation (moe/README.md has the picture; gemm/nvfp4/plan.cpp picks the
// expert kernels, fused or grouped, by T):
//   route (logits, top-K, counts) → permute (offsets, rows) → [stage x: W4A4]
//     (T ≤ kSmallRouteTokens: route_small.cu, the same in two launches)
//   fused:   gate_up+SwiGLU expert kernel → [stage act: W4A4] → down expert kernel
//            (expert_stream.cu for W4A16, expert_mma.cuh for W4A4)
//   grouped: gather → nvfp4_grouped_gemm_swiglu + nvfp4_gemm_swiglu (shared) → [stage act]
//            → nvfp4_grouped_gemm + nvfp4_gemm
//   → combine (gather by token, fixed order; on the W4A16 fused path at
//     T ≤ kSmallRouteTokens the down kernel's last warp per m-tile does it: fuses_combine).
//
// Dimension letters: T tokens, D model width, E routed experts, K experts per token, F expert
// width, R = T·K routed rows, S = R + T grouped rows (group E: the shared expert).
//
// Without a shared expert (ops.h: MoeWeightsView::has_shared), group E still gets its T rows
// from the routing front (so the row layout does not depend on it), but no kernel reads or
// writes them: the expert kernels stop one active group early (E is always the last), the
// combine adds no shared row, and W4A4 stages only the R routed rows.
#include <algorithm>
#include <optional>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/gemm/nvfp4/expert_mma.cuh"
#include "kernels/cuda/gemm/nvfp4/plan.h"
#include "kernels/cuda/moe/kernels.h"
#include "kernels/cuda/moe/moe_pipeline.h"
#include "kernels/cuda/stream.h"

namespace dsv4::kernels::cuda::moe {
namespace {

// The workspace's buffers as typed pointers and views.
struct Scratch {
  const MoeWorkspace& ws;
  char* base;

  template <typename T>
  T* at(int64_t offset) const {
    return reinterpret_cast<T*>(base + offset);
  }
  TensorView view(int64_t offset, DType dtype, Shape shape) const {
    return TensorView::contiguous(base + offset, dtype, Device::kCuda, shape);
  }
  // An NVFP4 activation [rows, cols] whose packed and scale buffers start at the given offsets.
  StagedActivation staged(int64_t packed, int64_t scale, int64_t global, int64_t rows,
                          int64_t cols) const {
    return StagedActivation{view(packed, DType::kU8, {rows, cols / 2}),
                            view(scale, DType::kU8, {rows, cols / 16}),
                            view(global, DType::kF32, {1})};
  }
};

StagedActivation rows_of(const StagedActivation& a, int64_t begin, int64_t end) {
  return StagedActivation{a.packed.rows(begin, end), a.block_scale.rows(begin, end),
                          a.global_scale};
}

ExpertParams expert_params(const format::Nvfp4View& routed, const format::Nvfp4View& shared,
                           const int* offsets, const int* active) {
  ExpertParams p{};
  p.packed = routed.packed.data_as<const uint8_t>();
  p.scale = routed.block_scale.data_as<const uint8_t>();
  p.global = routed.global_scale.data_as<const float>();
  p.shared_packed = shared.packed.data_as<const uint8_t>();
  p.shared_scale = shared.block_scale.data_as<const uint8_t>();
  p.shared_global = shared.global_scale.data_as<const float>();
  p.n_experts = static_cast<int>(routed.n_matrices());
  p.n_rows = static_cast<int>(routed.n_rows());
  p.k = static_cast<int>(routed.n_cols());
  p.offsets = offsets;
  p.active = active;
  return p;
}

using sm90::MoeExperts;

// The layer's input activations as the expert kernels read them: bf16 rows in the pair layout
// (W4A16) or their NVFP4 staging (W4A4), at the workspace offsets given.
void set_activations(ExpertParams& p, const Scratch& s, int64_t bf16, int64_t packed,
                     int64_t scale, int64_t global) {
  p.act_bf16 = s.at<uint16_t>(bf16);
  p.act_packed = s.at<uint8_t>(packed);
  p.act_scale = s.at<uint8_t>(scale);
  p.act_global = s.at<float>(global);
}

// One layer (gate_up with its SwiGLU, or down) on the fused expert kernel.
void launch_fused(MoeExperts experts, const ExpertParams& p, bool gate_up, int n_slots,
                  int max_rows) {
  if (experts == MoeExperts::kMma) {
    launch_expert(p, gate_up, /*nvfp4_act=*/true, n_slots, op_stream());
  } else {
    launch_expert_stream(p, gate_up, n_slots, max_rows, op_stream());
  }
}

// Whether the down kernel combines into y itself, saving the combine launch: on the W4A16 fused
// path at decode sizes, where the small router zeroes the down kernel's m-tile counts and one
// warp per m-tile sums T·16 outputs.
bool fuses_combine(MoeExperts experts, int64_t n_tokens) {
  return experts == MoeExperts::kStream && n_tokens <= kSmallRouteTokens;
}

// y: the MoE output when the down kernel combines into it (fuses_combine), else nullptr.
Status run_fused(MoeExperts experts, const Scratch& s, const MoeWeightsView& w,
                 const MoeConfig& cfg, float* y) {
  const MoeWorkspace& ws = s.ws;
  const bool w4a4 = experts == MoeExperts::kMma;
  const int n_slots = static_cast<int>(std::min(ws.n_experts, ws.n_tokens * ws.k_used) + 1);
  const int max_rows = static_cast<int>(ws.n_tokens);
  ExpertParams l1 = expert_params(w.w13, w.shared_w13, s.at<int>(ws.offsets), s.at<int>(ws.active));
  set_activations(l1, s, ws.x_bf16, ws.x_packed, ws.x_scale, ws.x_global);
  l1.row_token = s.at<int>(ws.row_token);
  l1.ffn = static_cast<int>(ws.ffn);
  l1.swiglu_limit = cfg.swiglu_limit;
  l1.out_f32 = w4a4 ? s.at<float>(ws.act) : nullptr;
  l1.out_bf16 = w4a4 ? nullptr : s.at<uint16_t>(ws.act);
  launch_fused(experts, l1, /*gate_up=*/true, n_slots, max_rows);
  if (w4a4) {
    const int64_t staged_rows = w.has_shared() ? ws.n_rows : ws.n_tokens * ws.k_used;
    DSV4_RETURN_IF_ERROR(cuda::stage_activation(
        s.view(ws.act, DType::kF32, {staged_rows, ws.ffn}), w.w2_input_scale,
        s.staged(ws.act_packed, ws.act_scale, ws.act_global, staged_rows, ws.ffn)));
  }
  ExpertParams l2 = expert_params(w.w2, w.shared_w2, s.at<int>(ws.offsets), s.at<int>(ws.active));
  set_activations(l2, s, ws.act, ws.act_packed, ws.act_scale, ws.act_global);
  l2.out_f32 = s.at<float>(ws.down);
  l2.combine_y = y;
  l2.row_of = s.at<int>(ws.row_of);
  l2.sel_weight = s.at<float>(ws.sel_weight);
  l2.mtile_rows_done = s.at<int>(ws.mtile_done);
  l2.n_tokens = static_cast<int>(ws.n_tokens);
  l2.k_used = static_cast<int>(ws.k_used);
  launch_fused(experts, l2, /*gate_up=*/false, n_slots, max_rows);
  return ok_status();
}

// L1 of the grouped path with its SwiGLU (in the GEMM's epilogue where the plan allows, else
// through gate_up): routed rows [0, R) over the E experts, the shared expert's rows [R, S)
// through the plain GEMM.
template <typename A>
Status grouped_gate_up(const A& a_routed, const A& a_shared, const MoeWeightsView& w,
                       const MoeConfig& cfg, const TensorView& offsets, const TensorView& gate_up,
                       const TensorView& act, int64_t n_routed) {
  const int64_t n_rows = act.size(0);
  DSV4_RETURN_IF_ERROR(cuda::nvfp4_grouped_gemm_swiglu(a_routed, w.w13, offsets, cfg.swiglu_limit,
                                                       gate_up.rows(0, n_routed),
                                                       act.rows(0, n_routed)));
  if (!w.has_shared()) return ok_status();
  return cuda::nvfp4_gemm_swiglu(a_shared, w.shared_w13, cfg.swiglu_limit,
                                 gate_up.rows(n_routed, n_rows), act.rows(n_routed, n_rows));
}

// L2 of the grouped path, split as L1.
template <typename A>
Status grouped_down(const A& a_routed, const A& a_shared, const MoeWeightsView& w,
                    const TensorView& offsets, const TensorView& down, int64_t n_routed) {
  const int64_t n_rows = down.size(0);
  DSV4_RETURN_IF_ERROR(cuda::nvfp4_grouped_gemm(a_routed, w.w2, offsets, down.rows(0, n_routed)));
  if (!w.has_shared()) return ok_status();
  return cuda::nvfp4_gemm(a_shared, w.shared_w2, down.rows(n_routed, n_rows));
}

Status run_grouped(const Scratch& s, const TensorView& x, const MoeWeightsView& w,
                   const MoeConfig& cfg) {
  const MoeWorkspace& ws = s.ws;
  const int64_t n_routed = ws.n_tokens * ws.k_used, n_rows = ws.n_rows;
  const int rows = static_cast<int>(n_rows);
  const TensorView offsets = s.view(ws.offsets, DType::kI32, {ws.n_experts + 1});
  const TensorView gate_up = s.view(ws.gate_up, DType::kF32, {n_rows, 2 * ws.ffn});
  const TensorView down = s.view(ws.down, DType::kF32, {n_rows, ws.dim});
  const TensorView act_f32 = s.view(ws.act, DType::kF32, {n_rows, ws.ffn});
  const TensorView act_bf16 = s.view(ws.act, DType::kBF16, {n_rows, ws.ffn});
  if (cfg.mode == MoeMode::kW4A16) {
    const TensorView a = s.view(ws.x_bf16, DType::kBF16, {n_rows, ws.dim});
    launch_gather_bf16(x.data_as<const float>(), s.at<int>(ws.row_token), rows,
                       static_cast<int>(ws.dim), s.at<uint16_t>(ws.x_bf16), op_stream());
    DSV4_RETURN_IF_ERROR(grouped_gate_up(a.rows(0, n_routed), a.rows(n_routed, n_rows), w, cfg,
                                         offsets, gate_up, act_bf16, n_routed));
    return grouped_down(act_bf16.rows(0, n_routed), act_bf16.rows(n_routed, n_rows), w, offsets,
                        down, n_routed);
  }
  const StagedActivation a =
      s.staged(ws.x_rows_packed, ws.x_rows_scale, ws.x_global, n_rows, ws.dim);
  launch_gather_nvfp4(s.at<uint8_t>(ws.x_packed), s.at<uint8_t>(ws.x_scale),
                      s.at<int>(ws.row_token), rows, static_cast<int>(ws.dim),
                      s.at<uint8_t>(ws.x_rows_packed), s.at<uint8_t>(ws.x_rows_scale), op_stream());
  DSV4_RETURN_IF_ERROR(grouped_gate_up(rows_of(a, 0, n_routed), rows_of(a, n_routed, n_rows), w,
                                       cfg, offsets, gate_up, act_f32, n_routed));
  const StagedActivation act = s.staged(ws.act_packed, ws.act_scale, ws.act_global, n_rows, ws.ffn);
  const int64_t staged_rows = w.has_shared() ? n_rows : n_routed;
  DSV4_RETURN_IF_ERROR(cuda::stage_activation(act_f32.rows(0, staged_rows), w.w2_input_scale,
                                              rows_of(act, 0, staged_rows)));
  return grouped_down(rows_of(act, 0, n_routed), rows_of(act, n_routed, n_rows), w, offsets, down,
                      n_routed);
}

// The routed experts the kernels read: w's, or with w.touched_copies their copies, which
// launch_copy_touched fills (after the routing, which chooses the experts) with `copy`.
struct RoutedExperts {
  MoeWeightsView weights;
  std::optional<TouchedExpertCopy> copy;
};

// Checks the copies' regions against w's (the kernel copies whole experts of w's layout) before
// anything is launched.
Result<RoutedExperts> routed_experts(const MoeWeightsView& w, const int* active) {
  const ExpertBulkCopies& to = w.touched_copies;
  if (to.empty()) return RoutedExperts{w, std::nullopt};
  const TensorView* from[kExpertBulkRegions] = {&w.w13.packed, &w.w13.block_scale, &w.w2.packed,
                                                &w.w2.block_scale};
  const TensorView* into[kExpertBulkRegions] = {&to.w13_packed, &to.w13_block_scale, &to.w2_packed,
                                                &to.w2_block_scale};
  TouchedExpertCopy copy{active, static_cast<int>(w.w13.n_matrices()), {}, {}, {}};
  if (copy.n_experts == 0) return invalid_argument("moe_ffn: no routed experts to copy");
  for (int r = 0; r < kExpertBulkRegions; ++r) {
    const TensorView &a = *from[r], &b = *into[r];
    const int64_t expert_bytes = a.bytes() / copy.n_experts;
    if (b.shape != a.shape || b.dtype != a.dtype || !a.is_contiguous() || !b.is_contiguous() ||
        expert_bytes % 16 != 0 || reinterpret_cast<uintptr_t>(a.data) % 16 != 0 ||
        reinterpret_cast<uintptr_t>(b.data) % 16 != 0) {
      return invalid_argument("moe_ffn: touched-expert copy region " + std::to_string(r) + " is " +
                              b.shape.to_string() + ", needs the contiguous, 16-byte aligned " +
                              a.shape.to_string() + " of the experts it copies");
    }
    copy.from[r] = a.data;
    copy.to[r] = b.data;
    copy.region_words[r] = expert_bytes / 16;
  }
  MoeWeightsView copied = w;
  copied.w13.packed = to.w13_packed, copied.w13.block_scale = to.w13_block_scale;
  copied.w2.packed = to.w2_packed, copied.w2.block_scale = to.w2_block_scale;
  copied.touched_copies = {};
  return RoutedExperts{copied, copy};
}

// What this pipeline supports beyond the op contract; anything else is unimplemented.
Status check_supported(const MoeWeightsView& w, const MoeConfig& cfg) {
  const int64_t dim = w.gate.size(1), ffn = w.w2.n_cols();
  for (const format::Nvfp4View* v : {&w.w13, &w.w2, &w.shared_w13, &w.shared_w2}) {
    if (v->packed.data == nullptr) continue;  // no shared expert
    if (v->scale_layout != format::ScaleLayout::kLinear) {
      return unimplemented("moe_ffn (CUDA): expert block scales must be linear");
    }
  }
  if (dim % 128 != 0 || ffn % 128 != 0 || dim > 8192 || ffn > 8192 || w.gate.size(0) > 512 ||
      cfg.n_expert_used > 16) {
    return unimplemented(
        "moe_ffn (CUDA): needs D, F multiples of 128 up to 8192, E ≤ 512, "
        "K ≤ 16; got D " +
        std::to_string(dim) + ", F " + std::to_string(ffn));
  }
  return ok_status();
}

}  // namespace

MoeExperts moe_experts_on(MoePath path, int64_t n_tokens, bool w4a4) {
  switch (path) {
    case MoePath::kAuto: return sm90::plan_moe_experts(n_tokens, w4a4);
    case MoePath::kFused: return sm90::fused_moe_experts(w4a4);
    case MoePath::kGrouped: return MoeExperts::kGrouped;
  }
  return MoeExperts::kGrouped;
}

Status moe_ffn_on_path(const TensorView& x, const TensorView& token_ids, const MoeWeightsView& w,
                       const MoeConfig& cfg, const TensorView& workspace, const TensorView& y,
                       MoePath path) {
  DSV4_RETURN_IF_ERROR(check_supported(w, cfg));
  const int64_t n_tokens = x.size(0);
  DSV4_CHECK(x.dtype == DType::kF32 && x.is_contiguous() && y.shape == x.shape &&
                 y.is_contiguous() && x.size(1) == w.gate.size(1),
             "moe_ffn: x, y must be f32 [T, D]");
  if (n_tokens == 0) return ok_status();
  const MoeWorkspace ws = plan_workspace(n_tokens, w, cfg);
  DSV4_CHECK(static_cast<int64_t>(workspace.bytes()) >= ws.total_bytes,
             "moe_ffn: workspace of %zu bytes, needs %lld", workspace.bytes(),
             static_cast<long long>(ws.total_bytes));
  const bool w4a4 = cfg.mode == MoeMode::kW4A4;
  const MoeExperts experts = moe_experts_on(path, n_tokens, w4a4);
  const bool fused = experts != MoeExperts::kGrouped;
  const Scratch s{ws, static_cast<char*>(workspace.data)};
  const cudaStream_t stream = op_stream();

  RouterParams router{};
  router.x = x.data_as<const float>();
  router.gate = w.gate.data_as<const float>();
  router.bias = w.tid2eid.data ? nullptr : w.bias.data_as<const float>();
  router.tid2eid = w.tid2eid.data_as<const int64_t>();
  router.token_ids = token_ids.data_as<const int64_t>();
  router.n_tokens = static_cast<int>(n_tokens);
  router.dim = static_cast<int>(ws.dim);
  router.n_experts = static_cast<int>(ws.n_experts);
  router.k_used = static_cast<int>(ws.k_used);
  router.logits_splits = ws.logits_splits;
  router.route_scale = cfg.routed_scaling_factor;
  router.logits = s.at<float>(ws.logits);
  router.sel_expert = s.at<int>(ws.sel_expert);
  router.sel_weight = s.at<float>(ws.sel_weight);
  router.counts = s.at<int>(ws.counts);
  router.x_bf16 = experts == MoeExperts::kStream ? s.at<uint16_t>(ws.x_bf16) : nullptr;
  const bool fused_combine = fuses_combine(experts, n_tokens);
  router.mtile_rows_done = fused_combine ? s.at<int>(ws.mtile_done) : nullptr;
  router.n_mtiles = static_cast<int>(ws.dim / 16);
  const PermuteOutputs permuted{s.at<int>(ws.offsets), s.at<int>(ws.active),
                                s.at<int>(ws.row_token), s.at<int>(ws.row_of)};
  DSV4_ASSIGN_OR_RETURN(const RoutedExperts routed, routed_experts(w, permuted.active));
  if (n_tokens <= kSmallRouteTokens) {
    launch_route_small(router, permuted, stream);
  } else {
    DSV4_CUDA_CHECK(cudaMemsetAsync(router.counts, 0, 4 * (ws.n_experts + 1), stream));
    launch_router(router, stream);
    launch_permute(router.sel_expert, router.counts, router.n_tokens, router.k_used,
                   router.n_experts, permuted.offsets, permuted.active, permuted.row_token,
                   permuted.row_of, stream);
  }
  if (routed.copy) launch_copy_touched(*routed.copy, stream);
  if (w4a4) {
    DSV4_RETURN_IF_ERROR(cuda::stage_activation(
        x, w.w13_input_scale, s.staged(ws.x_packed, ws.x_scale, ws.x_global, n_tokens, ws.dim)));
  }
  DSV4_RETURN_IF_ERROR(
      fused ? run_fused(experts, s, routed.weights, cfg,
                        fused_combine ? y.data_as<float>() : nullptr)
            : run_grouped(s, x, routed.weights, cfg));
  if (fused_combine) return ok_status();
  launch_combine(s.at<float>(ws.down), s.at<int>(ws.row_of), router.sel_weight, router.n_tokens,
                 router.k_used, router.dim, y.data_as<float>(), stream, w.has_shared());
  return ok_status();
}

}  // namespace dsv4::kernels::cuda::moe

namespace dsv4::kernels::cuda {

int64_t moe_ffn_workspace_bytes(int64_t n_tokens, const MoeWeightsView& w, const MoeConfig& cfg) {
  return moe::plan_workspace(n_tokens, w, cfg).total_bytes;
}

Status moe_ffn(const TensorView& x, const TensorView& token_ids, const MoeWeightsView& w,
               const MoeConfig& cfg, const TensorView& workspace, const TensorView& y) {
  return moe::moe_ffn_on_path(x, token_ids, w, cfg, workspace, y, moe::MoePath::kAuto);
}

}  // namespace dsv4::kernels::cuda

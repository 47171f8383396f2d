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

Result<MoeSteps> MoeSteps::plan(const TensorView& x, const TensorView& token_ids,
                                const MoeWeightsView& w, const MoeConfig& cfg,
                                const TensorView& workspace, const TensorView& y, MoePath path) {
  DSV4_RETURN_IF_ERROR(check_supported(w, cfg));
  const int64_t n_tokens = x.size(0);
  DSV4_CHECK(x.dtype == DType::kF32 && x.is_contiguous() && y.shape == x.shape &&
                 y.is_contiguous() && x.size(1) == w.gate.size(1),
             "moe_ffn: x, y must be f32 [T, D]");
  MoeSteps steps;
  steps.x_ = x, steps.token_ids_ = token_ids, steps.y_ = y, steps.cfg_ = cfg;
  steps.ws_ = plan_workspace(n_tokens, w, cfg);
  if (n_tokens == 0) return steps;
  DSV4_CHECK(static_cast<int64_t>(workspace.bytes()) >= steps.ws_.total_bytes,
             "moe_ffn: workspace of %zu bytes, needs %lld", workspace.bytes(),
             static_cast<long long>(steps.ws_.total_bytes));
  steps.experts_ = moe_experts_on(path, n_tokens, cfg.mode == MoeMode::kW4A4);
  steps.base_ = static_cast<char*>(workspace.data);
  steps.given_ = w;
  steps.w_ = w.as_read();
  return steps;
}

bool MoeSteps::fused() const { return experts_ != MoeExperts::kGrouped; }

Status MoeSteps::front() const {
  if (ws_.n_tokens == 0) return ok_status();
  const Scratch s{ws_, base_};
  const cudaStream_t stream = op_stream();
  RouterParams router{};
  router.x = x_.data_as<const float>();
  router.gate = w_.gate.data_as<const float>();
  router.bias = w_.tid2eid.data ? nullptr : w_.bias.data_as<const float>();
  router.tid2eid = w_.tid2eid.data_as<const int64_t>();
  router.token_ids = token_ids_.data_as<const int64_t>();
  router.n_tokens = static_cast<int>(ws_.n_tokens);
  router.dim = static_cast<int>(ws_.dim);
  router.n_experts = static_cast<int>(ws_.n_experts);
  router.k_used = static_cast<int>(ws_.k_used);
  router.logits_splits = ws_.logits_splits;
  router.route_scale = cfg_.routed_scaling_factor;
  router.logits = s.at<float>(ws_.logits);
  router.sel_expert = s.at<int>(ws_.sel_expert);
  router.sel_weight = s.at<float>(ws_.sel_weight);
  router.counts = s.at<int>(ws_.counts);
  router.x_bf16 = experts_ == MoeExperts::kStream ? s.at<uint16_t>(ws_.x_bf16) : nullptr;
  router.mtile_rows_done =
      fuses_combine(experts_, ws_.n_tokens) ? s.at<int>(ws_.mtile_done) : nullptr;
  router.n_mtiles = static_cast<int>(ws_.dim / 16);
  const PermuteOutputs permuted{s.at<int>(ws_.offsets), s.at<int>(ws_.active),
                                s.at<int>(ws_.row_token), s.at<int>(ws_.row_of)};
  if (ws_.n_tokens <= kSmallRouteTokens) {
    launch_route_small(router, permuted, stream);
  } else {
    DSV4_CUDA_CHECK(cudaMemsetAsync(router.counts, 0, 4 * (ws_.n_experts + 1), stream));
    launch_router(router, stream);
    launch_permute(router.sel_expert, router.counts, router.n_tokens, router.k_used,
                   router.n_experts, permuted.offsets, permuted.active, permuted.row_token,
                   permuted.row_of, stream);
  }
  if (!given_.touched_copies.empty()) {
    const TensorView active = s.view(ws_.active, DType::kI32, {ws_.n_experts + 2});
    cuda::copy_touched_experts(active, given_.routed_bulk(), given_.touched_copies);
  }
  if (cfg_.mode != MoeMode::kW4A4) return ok_status();
  return cuda::stage_activation(
      x_, w_.w13_input_scale,
      s.staged(ws_.x_packed, ws_.x_scale, ws_.x_global, ws_.n_tokens, ws_.dim));
}

const int* MoeSteps::active_groups() const {
  return reinterpret_cast<const int*>(base_ + ws_.active);
}

int MoeSteps::all_slots() const {
  return static_cast<int>(std::min(ws_.n_experts, ws_.n_tokens * ws_.k_used) + 1);
}

Status MoeSteps::gate_up(const int* active, int n_slots) const {
  if (ws_.n_tokens == 0) return ok_status();
  const Scratch s{ws_, base_};
  if (fused()) {
    const bool w4a4 = experts_ == MoeExperts::kMma;
    ExpertParams l1 = expert_params(w_.w13, w_.shared_w13, s.at<int>(ws_.offsets),
                                    active ? active : s.at<int>(ws_.active));
    set_activations(l1, s, ws_.x_bf16, ws_.x_packed, ws_.x_scale, ws_.x_global);
    l1.row_token = s.at<int>(ws_.row_token);
    l1.ffn = static_cast<int>(ws_.ffn);
    l1.swiglu_limit = cfg_.swiglu_limit;
    l1.out_f32 = w4a4 ? s.at<float>(ws_.act) : nullptr;
    l1.out_bf16 = w4a4 ? nullptr : s.at<uint16_t>(ws_.act);
    launch_fused(experts_, l1, /*gate_up=*/true, active ? n_slots : all_slots(),
                 static_cast<int>(ws_.n_tokens));
    return ok_status();
  }
  DSV4_CHECK(active == nullptr, "moe_ffn: the grouped path runs every active group");
  const int64_t n_routed = ws_.n_tokens * ws_.k_used, n_rows = ws_.n_rows;
  const int rows = static_cast<int>(n_rows);
  const TensorView offsets = s.view(ws_.offsets, DType::kI32, {ws_.n_experts + 1});
  const TensorView gate_up = s.view(ws_.gate_up, DType::kF32, {n_rows, 2 * ws_.ffn});
  if (cfg_.mode == MoeMode::kW4A16) {
    const TensorView a = s.view(ws_.x_bf16, DType::kBF16, {n_rows, ws_.dim});
    launch_gather_bf16(x_.data_as<const float>(), s.at<int>(ws_.row_token), rows,
                       static_cast<int>(ws_.dim), s.at<uint16_t>(ws_.x_bf16), op_stream());
    return grouped_gate_up(a.rows(0, n_routed), a.rows(n_routed, n_rows), w_, cfg_, offsets,
                           gate_up, s.view(ws_.act, DType::kBF16, {n_rows, ws_.ffn}), n_routed);
  }
  const StagedActivation a =
      s.staged(ws_.x_rows_packed, ws_.x_rows_scale, ws_.x_global, n_rows, ws_.dim);
  launch_gather_nvfp4(s.at<uint8_t>(ws_.x_packed), s.at<uint8_t>(ws_.x_scale),
                      s.at<int>(ws_.row_token), rows, static_cast<int>(ws_.dim),
                      s.at<uint8_t>(ws_.x_rows_packed), s.at<uint8_t>(ws_.x_rows_scale),
                      op_stream());
  return grouped_gate_up(rows_of(a, 0, n_routed), rows_of(a, n_routed, n_rows), w_, cfg_, offsets,
                         gate_up, s.view(ws_.act, DType::kF32, {n_rows, ws_.ffn}), n_routed);
}

Status MoeSteps::stage_hidden() const {
  if (ws_.n_tokens == 0 || cfg_.mode != MoeMode::kW4A4) return ok_status();
  const Scratch s{ws_, base_};
  const int64_t staged_rows = w_.has_shared() ? ws_.n_rows : ws_.n_tokens * ws_.k_used;
  return cuda::stage_activation(
      s.view(ws_.act, DType::kF32, {staged_rows, ws_.ffn}), w_.w2_input_scale,
      s.staged(ws_.act_packed, ws_.act_scale, ws_.act_global, staged_rows, ws_.ffn));
}

Status MoeSteps::down(const int* active, int n_slots) const {
  if (ws_.n_tokens == 0) return ok_status();
  const Scratch s{ws_, base_};
  if (fused()) {
    // The fused combine's last warp per m-tile waits for every row of the step: a launch over
    // some groups would leave y unwritten, and combine() skips it on that path.
    DSV4_CHECK(active == nullptr || !fuses_combine(experts_, ws_.n_tokens),
               "moe_ffn: the down kernel that combines runs every active group");
    ExpertParams l2 = expert_params(w_.w2, w_.shared_w2, s.at<int>(ws_.offsets),
                                    active ? active : s.at<int>(ws_.active));
    set_activations(l2, s, ws_.act, ws_.act_packed, ws_.act_scale, ws_.act_global);
    l2.out_f32 = s.at<float>(ws_.down);
    l2.combine_y = fuses_combine(experts_, ws_.n_tokens) ? y_.data_as<float>() : nullptr;
    l2.row_of = s.at<int>(ws_.row_of);
    l2.sel_weight = s.at<float>(ws_.sel_weight);
    l2.mtile_rows_done = s.at<int>(ws_.mtile_done);
    l2.n_tokens = static_cast<int>(ws_.n_tokens);
    l2.k_used = static_cast<int>(ws_.k_used);
    launch_fused(experts_, l2, /*gate_up=*/false, active ? n_slots : all_slots(),
                 static_cast<int>(ws_.n_tokens));
    return ok_status();
  }
  DSV4_CHECK(active == nullptr, "moe_ffn: the grouped path runs every active group");
  const int64_t n_routed = ws_.n_tokens * ws_.k_used, n_rows = ws_.n_rows;
  const TensorView offsets = s.view(ws_.offsets, DType::kI32, {ws_.n_experts + 1});
  const TensorView down = s.view(ws_.down, DType::kF32, {n_rows, ws_.dim});
  if (cfg_.mode == MoeMode::kW4A16) {
    const TensorView act = s.view(ws_.act, DType::kBF16, {n_rows, ws_.ffn});
    return grouped_down(act.rows(0, n_routed), act.rows(n_routed, n_rows), w_, offsets, down,
                        n_routed);
  }
  const StagedActivation act =
      s.staged(ws_.act_packed, ws_.act_scale, ws_.act_global, n_rows, ws_.ffn);
  return grouped_down(rows_of(act, 0, n_routed), rows_of(act, n_routed, n_rows), w_, offsets, down,
                      n_routed);
}

Status MoeSteps::combine(int64_t begin, int64_t end) const {
  DSV4_CHECK(0 <= begin && begin <= end && end <= ws_.n_tokens,
             "moe_ffn: combine of tokens [%lld, %lld) of %lld", (long long)begin, (long long)end,
             (long long)ws_.n_tokens);
  if (begin == end || fuses_combine(experts_, ws_.n_tokens)) return ok_status();
  const Scratch s{ws_, base_};
  const int64_t slots = ws_.k_used + 1;
  launch_combine(s.at<float>(ws_.down), s.at<int>(ws_.row_of) + begin * slots,
                 s.at<float>(ws_.sel_weight) + begin * slots, static_cast<int>(end - begin),
                 static_cast<int>(ws_.k_used), static_cast<int>(ws_.dim),
                 y_.data_as<float>() + begin * ws_.dim, op_stream(), w_.has_shared());
  return ok_status();
}

Status moe_ffn_on_path(const TensorView& x, const TensorView& token_ids, const MoeWeightsView& w,
                       const MoeConfig& cfg, const TensorView& workspace, const TensorView& y,
                       MoePath path) {
  DSV4_ASSIGN_OR_RETURN(const MoeSteps steps,
                        MoeSteps::plan(x, token_ids, w, cfg, workspace, y, path));
  DSV4_RETURN_IF_ERROR(steps.front());
  DSV4_RETURN_IF_ERROR(steps.gate_up(nullptr, 0));
  DSV4_RETURN_IF_ERROR(steps.stage_hidden());
  DSV4_RETURN_IF_ERROR(steps.down(nullptr, 0));
  return steps.combine(0, steps.workspace().n_tokens);
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

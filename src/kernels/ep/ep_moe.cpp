#include "kernels/ep/ep_moe.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/ep/dispatch_plan.h"
#include "kernels/ep/moe_pieces.h"

namespace dsv4::kernels::ep {
namespace {

// Max all-reduce of one float through the `scales` words of the symmetric buffers. Max is exact
// and order-free, so every rank gets the amax of the concatenated tensor.
Result<float> all_reduce_max(HostRankGroup& group, int rank, int word, float value, EpPhase phase) {
  group.buffers()[rank].scales()[word] = value;
  DSV4_RETURN_IF_ERROR(group.barrier(rank, phase));
  float result = 0.0f;
  for (const RankBuffer& peer : group.buffers()) result = std::max(result, peer.scales()[word]);
  return result;
}

// Stages x with the calibrated decode scale when the layer has one (w13_input_scale /
// w2_input_scale: moe_ffn's static path), else with the amax every rank agreed on.
Status stage_agreed(const TensorView& x, const TensorView& static_scale, float amax,
                    const StagedActivation& out) {
  return static_scale.data ? stage_activation(x, static_scale, out)
                           : stage_with_amax(x, amax, out);
}

// The shared expert on this rank's tokens, split where the hidden scale is agreed (when the
// block has one in NVFP4; a caller with its own shared expert passes none).
struct SharedExpert {
  Tensor gate_up, act, down;  // f32 [T, 2F], [T, F], [T, D]
  StagedBuffer act_staged;
};

// Publishes the own tokens, staged with the agreed input amax, and the dispatch plan; the
// slot_row table tells owners where each (token, slot) output goes in the combine area: the
// row moe_group gave that slot, so the home's moe_combine sees moe_ffn's layout.
Status publish(HostRankGroup& group, int rank, const ExpertSharding& sharding, float amax,
               const TensorView& input_scale, const TensorView& x, const TokenRouting& routing) {
  const RankBuffer& own = group.buffers()[rank];
  const int64_t n_tokens = x.size(0), top_k = routing.ids.shape()[1];
  DSV4_RETURN_IF_ERROR(stage_agreed(x, input_scale, amax, own.staged(n_tokens)));
  const int32_t* ids = routing.ids.data_as<const int32_t>();
  publish_plan(plan_dispatch(ids, n_tokens, top_k, sharding), ids, n_tokens, top_k, own);
  for (int64_t r = 0; r < n_tokens * top_k; ++r) {
    own.slot_row()[routing.order.data_as<const int32_t>()[r]] = static_cast<int32_t>(r);
  }
  return ok_status();
}

// The dispatch transfer: one row per (source, token) in plan.recv_token order, read from the
// sources' buffers (a pull, as DeepGEMM's mega-MoE does over NVLink).
void pull_rows(HostRankGroup& group, const ReceivePlan& plan, const StagedActivation& recv) {
  const int64_t packed_bytes = recv.packed.size(1), scale_bytes = recv.block_scale.size(1);
  const float decode = *group.buffers()[0].staged(0).global_scale.data_as<float>();
  for (int s = 0; s < group.n_ranks(); ++s) {
    const StagedActivation peer = group.buffers()[s].staged(group.layout().max_tokens);
    DSV4_CHECK(*peer.global_scale.data_as<float>() == decode,
               "rank %d staged with another global scale than rank 0", s);
    for (int32_t r = plan.src_offsets[s]; r < plan.src_offsets[s + 1]; ++r) {
      const int64_t t = plan.recv_token[r];
      std::memcpy(recv.packed.data_as<uint8_t>() + r * packed_bytes,
                  peer.packed.data_as<uint8_t>() + t * packed_bytes, packed_bytes);
      std::memcpy(recv.block_scale.data_as<uint8_t>() + r * scale_bytes,
                  peer.block_scale.data_as<uint8_t>() + t * scale_bytes, scale_bytes);
    }
  }
  *recv.global_scale.data_as<float>() = decode;
}

// The combine transfer: routed output row r goes to its home rank (a push).
void push_rows(HostRankGroup& group, const ReceivePlan& plan, const TensorView& out) {
  const int64_t d = out.size(1);
  for (size_t r = 0; r < plan.row_slot.size(); ++r) {
    const RankBuffer& home = group.buffers()[plan.row_home[r]];
    const int32_t dst = home.slot_row()[plan.row_slot[r]];
    std::memcpy(home.combine(dst + 1).rows(dst, dst + 1).data, out.rows(r, r + 1).data,
                sizeof(float) * d);
  }
}

// Everything between the dispatch and combine barriers: routed experts of this rank's slice
// and the shared expert of its tokens, with the hidden scale agreed in between.
Status run_experts(HostRankGroup& group, int rank, const ExpertSharding& sharding,
                   const MoeWeightsView& w, const MoeConfig& cfg, int64_t n_tokens,
                   SharedExpert& shared) {
  const ReceivePlan plan = plan_receive(rank, sharding, cfg.n_expert_used, group.buffers());
  const MoeWeightsView local =
      slice_experts(w, sharding.first_expert(rank), sharding.n_local_experts(rank));
  const int64_t n_recv = plan.recv_token.size(), n_rows = plan.row_recv.size();
  const int64_t d = w.w13.n_cols(), f = w.w2.n_cols();
  DSV4_ASSIGN_OR_RETURN(StagedBuffer recv, StagedBuffer::create(n_recv, d));
  pull_rows(group, plan, recv.view());
  DSV4_ASSIGN_OR_RETURN(StagedBuffer rows, StagedBuffer::create(n_rows, d));
  gather_staged_rows(recv.view(), plan.row_recv.data(), rows.view());
  const TensorView offsets =
      TensorView::contiguous(const_cast<int32_t*>(plan.group_offsets.data()), DType::kI32,
                             Device::kCpu, {static_cast<int64_t>(plan.group_offsets.size())});
  DSV4_ASSIGN_OR_RETURN(Tensor gate_up, Tensor::empty(DType::kF32, {n_rows, 2 * f}));
  DSV4_ASSIGN_OR_RETURN(Tensor act, Tensor::empty(DType::kF32, {n_rows, f}));
  DSV4_RETURN_IF_ERROR(expert_gate_up(rows.view(), local.w13, offsets, cfg.swiglu_limit,
                                      gate_up.view(), act.view()));
  if (w.has_shared()) {
    DSV4_RETURN_IF_ERROR(expert_gate_up(group.buffers()[rank].staged(n_tokens), w.shared_w13,
                                        TensorView{}, cfg.swiglu_limit, shared.gate_up.view(),
                                        shared.act.view()));
  }
  const float local_amax =
      std::max(activation_amax(act.view()), activation_amax(shared.act.view()));
  DSV4_ASSIGN_OR_RETURN(
      float amax, all_reduce_max(group, rank, kHiddenAmax, local_amax, EpPhase::kHiddenScale));
  DSV4_ASSIGN_OR_RETURN(StagedBuffer act_staged, StagedBuffer::create(n_rows, f));
  DSV4_RETURN_IF_ERROR(stage_agreed(act.view(), w.w2_input_scale, amax, act_staged.view()));
  DSV4_ASSIGN_OR_RETURN(Tensor out, Tensor::empty(DType::kF32, {n_rows, d}));
  DSV4_RETURN_IF_ERROR(expert_down(act_staged.view(), local.w2, offsets, out.view()));
  push_rows(group, plan, out.view());
  if (!w.has_shared()) return ok_status();
  DSV4_RETURN_IF_ERROR(
      stage_agreed(shared.act.view(), w.w2_input_scale, amax, shared.act_staged.view()));
  return expert_down(shared.act_staged.view(), w.shared_w2, TensorView{}, shared.down.view());
}

Status check_io(const HostRankGroup& group, const MoeWeightsView& w, const MoeConfig& cfg,
                const EpMoeIo& io) {
  const SymmetricLayout& l = group.layout();
  if (cfg.mode != MoeMode::kW4A4) {
    return unimplemented("ep moe: only the W4A4 mode moves NVFP4 rows between ranks");
  }
  if (io.x.size(0) > l.max_tokens) {
    return invalid_argument("ep moe: " + std::to_string(io.x.size(0)) +
                            " tokens on this rank, the symmetric buffers hold " +
                            std::to_string(l.max_tokens));
  }
  DSV4_CHECK(io.x.size(1) == l.hidden && w.w13.n_cols() == l.hidden &&
                 cfg.n_expert_used == l.top_k && io.x.is_contiguous(),
             "ep moe: x [%lld, %lld], K %d do not match the layout (D %lld, K %lld)",
             (long long)io.x.size(0), (long long)io.x.size(1), cfg.n_expert_used,
             (long long)l.hidden, (long long)l.top_k);
  return ok_status();
}

Status forward(HostRankGroup& group, int rank, const ExpertSharding& sharding,
               const MoeWeightsView& w, const MoeConfig& cfg, const EpMoeIo& io) {
  DSV4_RETURN_IF_ERROR(check_io(group, w, cfg, io));
  const int64_t n_tokens = io.x.size(0), d = io.x.size(1), f = w.w2.n_cols();
  DSV4_ASSIGN_OR_RETURN(TokenRouting routing, route_tokens(io.x, io.token_ids, w, cfg));
  DSV4_ASSIGN_OR_RETURN(float amax, all_reduce_max(group, rank, kInputAmax, activation_amax(io.x),
                                                   EpPhase::kInputScale));
  DSV4_RETURN_IF_ERROR(publish(group, rank, sharding, amax, w.w13_input_scale, io.x, routing));
  DSV4_RETURN_IF_ERROR(group.barrier(rank, EpPhase::kDispatch));
  SharedExpert shared;  // [0, ·] tensors when the block has no shared expert
  const int64_t n_shared = w.has_shared() ? n_tokens : 0;
  DSV4_ASSIGN_OR_RETURN(shared.gate_up, Tensor::empty(DType::kF32, {n_shared, 2 * f}));
  DSV4_ASSIGN_OR_RETURN(shared.act, Tensor::empty(DType::kF32, {n_shared, f}));
  DSV4_ASSIGN_OR_RETURN(shared.down, Tensor::empty(DType::kF32, {n_shared, d}));
  DSV4_ASSIGN_OR_RETURN(shared.act_staged, StagedBuffer::create(n_shared, f));
  DSV4_RETURN_IF_ERROR(run_experts(group, rank, sharding, w, cfg, n_tokens, shared));
  DSV4_RETURN_IF_ERROR(group.barrier(rank, EpPhase::kCombine));
  const int64_t n_slots = n_tokens * cfg.n_expert_used;
  DSV4_RETURN_IF_ERROR(moe_combine(group.buffers()[rank].combine(n_slots), routing.order.view(),
                                   routing.weights.view(), io.y));
  return w.has_shared() ? add(io.y, shared.down.view(), io.y) : ok_status();
}

}  // namespace

Status ep_moe_forward(HostRankGroup& group, int rank, const ExpertSharding& sharding,
                      const MoeWeightsView& w, const MoeConfig& cfg, const EpMoeIo& io) {
  DSV4_CHECK(sharding.n_ranks() == group.n_ranks() && 0 <= rank && rank < group.n_ranks(),
             "ep moe: rank %d, sharding over %d ranks, group of %d", rank, sharding.n_ranks(),
             group.n_ranks());
  const Status status = forward(group, rank, sharding, w, cfg, io);
  if (!status.ok()) group.abort(rank, status);
  return status;
}

}  // namespace dsv4::kernels::ep

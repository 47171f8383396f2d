#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "base/buffer.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/moe/kernels.h"
#include "kernels/cuda/moe/moe_pipeline.h"
#include "kernels/ep/cuda/ep_moe_cuda.h"
#include "kernels/ep/cuda/transfer.h"

namespace dsv4::kernels::ep::cuda {
namespace {

namespace moe = kernels::cuda::moe;

// Bump allocation of the rank's device scratch, 256-byte aligned.
struct Carver {
  int64_t at = 0;
  int64_t take(int64_t bytes) {
    const int64_t offset = at;
    at += (std::max<int64_t>(bytes, 1) + 255) / 256 * 256;
    return offset;
  }
};

// One FFN's scratch, for the routed rows and again for the shared expert's tokens: gate_up f32
// [rows, 2F], act f32 [rows, F] and its NVFP4 staging (codes, scales, global), out f32 [rows, D].
struct FfnScratch {
  int64_t gate_up = 0, act = 0, act_packed = 0, act_scale = 0, act_global = 0, out = 0;
};
FfnScratch take_ffn(Carver& c, int64_t rows, int64_t f, int64_t d) {
  FfnScratch ffn;
  ffn.gate_up = c.take(4 * rows * 2 * f);
  ffn.act = c.take(4 * rows * f);
  ffn.act_packed = c.take(rows * f / 2);
  ffn.act_scale = c.take(rows * f / 16);
  ffn.act_global = c.take(4);
  ffn.out = c.take(4 * rows * d);
  return ffn;
}

// The router's and permutation's scratch is the head of moe_ffn's workspace (moe_pipeline.h,
// logits … row_of); its size depends on T through the logit splits, so take the largest.
int64_t router_bytes(int64_t max_tokens, const MoeWeightsView& w, const MoeConfig& cfg) {
  int64_t bytes = 0;
  for (int64_t t = 1; t <= max_tokens; ++t) {
    bytes = std::max(bytes, moe::plan_workspace(t, w, cfg).x_bf16);
  }
  return bytes;
}

Status nccl_status(ncclResult_t r, const char* what) {
  return r == ncclSuccess
             ? ok_status()
             : internal_error(std::string("ep nccl ") + what + ": " + ncclGetErrorString(r));
}

}  // namespace

// Offsets into `scratch` (device) of every buffer one call needs, sized for the worst case
// (every token of every rank sending all K slots here).
struct EpMoeRank::State {
  State(DeviceRankGroup* g, NcclGroup* n, int r, const ExpertSharding& sh,
        const MoeWeightsView& weights, const MoeConfig& c, Transport t)
      : group(g), nccl(n), rank(r), sharding(sh), w(weights), cfg(c), transport(t) {}

  DeviceRankGroup* group;
  NcclGroup* nccl;
  int rank;
  ExpertSharding sharding;
  MoeWeightsView w;
  MoeConfig cfg;
  Transport transport;
  Buffer scratch;
  int32_t* totals = nullptr;  // host-mapped {Nr, Nrows}
  int64_t router = 0, decode = 0, recv_packed = 0, recv_scale = 0, rows_packed = 0, rows_scale = 0,
          recv_token = 0, src_offsets = 0, group_offsets = 0, row_recv = 0, row_home = 0,
          row_slot = 0, images = 0, partial = 0;
  FfnScratch routed, shared;  // the routed rows [n_rows]; the shared expert's tokens [T]
  std::vector<RankBuffer> image_views;

  template <typename T>
  T* at(int64_t offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(scratch.data()) + offset);
  }
  TensorView view(int64_t offset, DType dtype, Shape shape) const {
    return TensorView::contiguous(at<char>(offset), dtype, Device::kCuda, shape);
  }
  StagedActivation staged(int64_t packed, int64_t scale, float* global, int64_t rows,
                          int64_t cols) const {
    return StagedActivation{view(packed, DType::kU8, {rows, cols / 2}),
                            view(scale, DType::kU8, {rows, cols / 16}),
                            TensorView::contiguous(global, DType::kF32, Device::kCuda, {1})};
  }
  ReceiveTables tables_view() const {
    return ReceiveTables{at<int32_t>(recv_token),
                         at<int32_t>(src_offsets),
                         at<int32_t>(group_offsets),
                         at<int32_t>(row_recv),
                         at<int32_t>(row_home),
                         at<int32_t>(row_slot),
                         totals};
  }
  // The views peers' published data is read through: their buffers, or the gathered images.
  const std::vector<RankBuffer>& peers() const {
    return transport == Transport::kPeer ? group->buffers() : image_views;
  }
  PeerSet peer_set() const {
    return PeerSet{const_cast<RankBuffer*>(peers().data()), sharding.n_ranks()};
  }
};

EpMoeRank::EpMoeRank(std::unique_ptr<State> state) : s_(std::move(state)) {}
EpMoeRank::~EpMoeRank() {
  if (s_ && s_->totals) cudaFreeHost(s_->totals);
}

Result<std::unique_ptr<EpMoeRank>> EpMoeRank::create(DeviceRankGroup& group, NcclGroup* nccl,
                                                     int rank, const ExpertSharding& sharding,
                                                     const MoeWeightsView& w, const MoeConfig& cfg,
                                                     Transport transport) {
  if (cfg.mode != MoeMode::kW4A4) {
    return unimplemented("ep moe (CUDA): only the W4A4 mode moves NVFP4 rows between ranks");
  }
  if (transport == Transport::kNccl && nccl == nullptr) {
    return invalid_argument("ep moe (CUDA): the NCCL transport needs an NcclGroup");
  }
  const SymmetricLayout& l = group.layout();
  DSV4_CHECK(w.w13.n_matrices() == sharding.n_local_experts(rank) && l.top_k == cfg.n_expert_used,
             "ep moe (CUDA): rank %d holds %lld routed experts, its slice is %lld", rank,
             (long long)w.w13.n_matrices(), (long long)sharding.n_local_experts(rank));
  DSV4_CUDA_CHECK(cudaSetDevice(rank));
  auto s = std::make_unique<State>(&group, nccl, rank, sharding, w, cfg, transport);
  const int64_t d = l.hidden, f = w.w2.n_cols(), t = l.max_tokens, r = l.n_ranks;
  const int64_t n_recv = r * t, n_rows = n_recv * cfg.n_expert_used;
  Carver c;
  s->router = c.take(router_bytes(t, w, cfg));
  s->decode = c.take(2 * sizeof(float));
  s->recv_packed = c.take(n_recv * d / 2);
  s->recv_scale = c.take(n_recv * d / 16);
  s->rows_packed = c.take(n_rows * d / 2);
  s->rows_scale = c.take(n_rows * d / 16);
  s->routed = take_ffn(c, n_rows, f, d);
  s->shared = take_ffn(c, t, f, d);
  s->recv_token = c.take(4 * n_recv);
  s->src_offsets = c.take(4 * (kMaxRanks + 1));
  s->group_offsets = c.take(4 * (sharding.n_local_experts(rank) + 1));
  s->row_recv = c.take(4 * n_rows);
  s->row_home = c.take(4 * n_rows);
  s->row_slot = c.take(4 * n_rows);
  if (transport == Transport::kNccl) {
    s->images = c.take(r * static_cast<int64_t>(l.published_bytes()));
    s->partial = c.take(4 * r * l.combine_rows() * d);
  }
  DSV4_ASSIGN_OR_RETURN(s->scratch, Buffer::allocate(static_cast<size_t>(c.at), Device::kCuda));
  DSV4_CUDA_CHECK(cudaHostAlloc(&s->totals, 2 * sizeof(int32_t), cudaHostAllocMapped));
  for (int64_t i = 0; transport == Transport::kNccl && i < r; ++i) {
    s->image_views.emplace_back(s->at<uint8_t>(s->images) + i * l.published_bytes(), l,
                                Device::kCuda);
  }
  return std::unique_ptr<EpMoeRank>(new EpMoeRank(std::move(s)));
}

namespace {

using State = EpMoeRank::State;

// Router and permutation of this rank's tokens (kernels/cuda/moe), into the head of scratch.
moe::MoeWorkspace route(const State& s, const EpMoeCudaIo& io) {
  const int64_t n_tokens = io.x.size(0);
  moe::MoeWorkspace ws = moe::plan_workspace(n_tokens, s.w, s.cfg);
  if (n_tokens == 0) return ws;  // a rank without tokens still takes part in every phase
  char* base = s.at<char>(s.router);
  auto ptr = [base](int64_t offset) { return base + offset; };
  DSV4_CUDA_CHECK(cudaMemsetAsync(ptr(ws.counts), 0, 4 * (ws.n_experts + 1), cudaStreamPerThread));
  moe::RouterParams r{};
  r.x = io.x.data_as<const float>();
  r.gate = s.w.gate.data_as<const float>();
  r.bias = s.w.tid2eid.data ? nullptr : s.w.bias.data_as<const float>();
  r.tid2eid = s.w.tid2eid.data_as<const int64_t>();
  r.token_ids = io.token_ids.data_as<const int64_t>();
  r.n_tokens = static_cast<int>(n_tokens);
  r.dim = static_cast<int>(ws.dim);
  r.n_experts = static_cast<int>(ws.n_experts);
  r.k_used = static_cast<int>(ws.k_used);
  r.logits_splits = ws.logits_splits;
  r.route_scale = s.cfg.routed_scaling_factor;
  r.logits = reinterpret_cast<float*>(ptr(ws.logits));
  r.sel_expert = reinterpret_cast<int*>(ptr(ws.sel_expert));
  r.sel_weight = reinterpret_cast<float*>(ptr(ws.sel_weight));
  r.counts = reinterpret_cast<int*>(ptr(ws.counts));
  moe::launch_router(r, cudaStreamPerThread);
  moe::launch_permute(r.sel_expert, r.counts, r.n_tokens, r.k_used, r.n_experts,
                      reinterpret_cast<int*>(ptr(ws.offsets)),
                      reinterpret_cast<int*>(ptr(ws.active)),
                      reinterpret_cast<int*>(ptr(ws.row_token)),
                      reinterpret_cast<int*>(ptr(ws.row_of)), cudaStreamPerThread);
  return ws;
}

// decode[word] = the decode scale of max |tensors| over every rank (one max all-reduce).
Status agree_decode(State& s, int word, std::initializer_list<TensorView> tensors, EpPhase phase) {
  const RankBuffer& own = s.group->buffers()[s.rank];
  float* amax = own.scales() + word;
  DSV4_CUDA_CHECK(cudaMemsetAsync(amax, 0, sizeof(float), cudaStreamPerThread));
  for (const TensorView& t : tensors) launch_amax(t.data_as<const float>(), t.numel(), amax);
  float* decode = s.at<float>(s.decode) + word;
  if (s.transport == Transport::kPeer) {
    s.group->barrier(s.rank, phase);
    launch_agree_decode(
        PeerSet{const_cast<RankBuffer*>(s.group->buffers().data()), s.sharding.n_ranks()}, word,
        decode);
    return ok_status();
  }
  DSV4_RETURN_IF_ERROR(
      nccl_status(ncclAllReduce(amax, amax, 1, ncclFloat, ncclMax,
                                static_cast<ncclComm_t>(s.nccl->comm(s.rank)), cudaStreamPerThread),
                  "all-reduce max"));
  RankBuffer self = own;
  launch_agree_decode(PeerSet{&self, 1}, word, decode);
  return ok_status();
}

// Stage x into the own buffer with the agreed scale, publish the plan, make it readable.
Status publish(State& s, const EpMoeCudaIo& io, const moe::MoeWorkspace& ws) {
  const RankBuffer& own = s.group->buffers()[s.rank];
  const int64_t n_tokens = io.x.size(0);
  const TensorView decode =
      TensorView::contiguous(s.at<float>(s.decode) + kInputAmax, DType::kF32, Device::kCuda, {1});
  if (n_tokens > 0) {
    DSV4_RETURN_IF_ERROR(kernels::cuda::stage_activation(io.x, decode, own.staged(n_tokens)));
  }
  launch_publish_plan(s.at<int32_t>(s.router + ws.sel_expert), s.at<int32_t>(s.router + ws.row_of),
                      static_cast<int>(n_tokens), s.cfg.n_expert_used, s.sharding, own);
  if (s.transport == Transport::kPeer) {
    s.group->barrier(s.rank, EpPhase::kDispatch);
    return ok_status();
  }
  return nccl_status(
      ncclAllGather(own.base(), s.at<uint8_t>(s.images), s.group->layout().published_bytes(),
                    ncclUint8, static_cast<ncclComm_t>(s.nccl->comm(s.rank)), cudaStreamPerThread),
      "all-gather");
}

// Dispatch and L1 for the routed rows this rank owns; returns their SwiGLU output.
Result<TensorView> routed_gate_up(State& s, int n_recv, int n_rows) {
  const int64_t d = s.group->layout().hidden, f = s.w.w2.n_cols();
  const ReceiveTables plan = s.tables_view();
  if (n_rows == 0) return s.view(s.routed.act, DType::kF32, {0, f});
  launch_pull_rows(s.peer_set(), plan, n_recv, d, s.at<uint8_t>(s.recv_packed),
                   s.at<uint8_t>(s.recv_scale));
  moe::launch_gather_nvfp4(s.at<uint8_t>(s.recv_packed), s.at<uint8_t>(s.recv_scale), plan.row_recv,
                           n_rows, static_cast<int>(d), s.at<uint8_t>(s.rows_packed),
                           s.at<uint8_t>(s.rows_scale), cudaStreamPerThread);
  // Every sender staged with the agreed decode scale, which this rank holds too.
  const StagedActivation rows =
      s.staged(s.rows_packed, s.rows_scale, s.at<float>(s.decode) + kInputAmax, n_rows, d);
  const TensorView offsets = s.view(s.group_offsets, DType::kI32, {s.w.w13.n_matrices() + 1});
  const TensorView gate_up = s.view(s.routed.gate_up, DType::kF32, {n_rows, 2 * f});
  const TensorView act = s.view(s.routed.act, DType::kF32, {n_rows, f});
  DSV4_RETURN_IF_ERROR(kernels::cuda::nvfp4_grouped_gemm_swiglu(rows, s.w.w13, offsets,
                                                                s.cfg.swiglu_limit, gate_up, act));
  return act;
}

// L1 of the shared expert on this rank's tokens.
Status shared_gate_up(State& s, int64_t n_tokens) {
  if (n_tokens == 0) return ok_status();
  const int64_t f = s.w.w2.n_cols();
  const TensorView gate_up = s.view(s.shared.gate_up, DType::kF32, {n_tokens, 2 * f});
  return kernels::cuda::nvfp4_gemm_swiglu(s.group->buffers()[s.rank].staged(n_tokens),
                                          s.w.shared_w13, s.cfg.swiglu_limit, gate_up,
                                          s.view(s.shared.act, DType::kF32, {n_tokens, f}));
}

// L2 of both halves; routed rows go home (peer stores, or the partial buffer reduce-scattered),
// the shared rows into the own combine area where launch_combine reads them.
Status down_and_return(State& s, const TensorView& act, int64_t n_tokens,
                       const moe::MoeWorkspace& ws) {
  const SymmetricLayout& l = s.group->layout();
  const int64_t d = l.hidden, f = s.w.w2.n_cols(), n_rows = act.size(0);
  float* decode = s.at<float>(s.decode) + kHiddenAmax;
  const TensorView decode_view = TensorView::contiguous(decode, DType::kF32, Device::kCuda, {1});
  const StagedActivation act_staged = s.staged(s.routed.act_packed, s.routed.act_scale,
                                               s.at<float>(s.routed.act_global), n_rows, f);
  const TensorView offsets = s.view(s.group_offsets, DType::kI32, {s.w.w2.n_matrices() + 1});
  const TensorView out = s.view(s.routed.out, DType::kF32, {n_rows, d});
  if (n_rows > 0) {
    DSV4_RETURN_IF_ERROR(kernels::cuda::stage_activation(act, decode_view, act_staged));
    DSV4_RETURN_IF_ERROR(kernels::cuda::nvfp4_grouped_gemm(act_staged, s.w.w2, offsets, out));
  }
  float* combine[kMaxRanks];
  const int32_t* slot_row[kMaxRanks];
  const int64_t area = l.combine_rows() * d;
  if (s.transport == Transport::kNccl) {
    DSV4_CUDA_CHECK(
        cudaMemsetAsync(s.at<float>(s.partial), 0, 4 * area * l.n_ranks, cudaStreamPerThread));
  }
  for (int r = 0; r < l.n_ranks; ++r) {
    combine[r] = s.transport == Transport::kPeer ? s.group->buffers()[r].combine_rows()
                                                 : s.at<float>(s.partial) + r * area;
    slot_row[r] = s.peers()[r].slot_row();
  }
  launch_push_rows(combine, slot_row, l.n_ranks, s.tables_view(), static_cast<int>(n_rows), d,
                   out.data_as<const float>());
  const RankBuffer& own = s.group->buffers()[s.rank];
  if (s.transport == Transport::kNccl) {
    DSV4_RETURN_IF_ERROR(nccl_status(
        ncclReduceScatter(s.at<float>(s.partial), own.combine_rows(), area, ncclFloat, ncclSum,
                          static_cast<ncclComm_t>(s.nccl->comm(s.rank)), cudaStreamPerThread),
        "reduce-scatter"));
  }
  if (n_tokens == 0) return ok_status();
  const StagedActivation shared_staged = s.staged(s.shared.act_packed, s.shared.act_scale,
                                                  s.at<float>(s.shared.act_global), n_tokens, f);
  DSV4_RETURN_IF_ERROR(kernels::cuda::stage_activation(
      s.view(s.shared.act, DType::kF32, {n_tokens, f}), decode_view, shared_staged));
  const TensorView shared_down = s.view(s.shared.out, DType::kF32, {n_tokens, d});
  DSV4_RETURN_IF_ERROR(kernels::cuda::nvfp4_gemm(shared_staged, s.w.shared_w2, shared_down));
  launch_place_shared(shared_down.data_as<const float>(), s.at<int32_t>(s.router + ws.row_of),
                      static_cast<int>(n_tokens), s.cfg.n_expert_used, d, own.combine_rows());
  return ok_status();
}

}  // namespace

Status EpMoeRank::forward(const EpMoeCudaIo& io) {
  State& s = *s_;
  const int64_t n_tokens = io.x.size(0), f = s.w.w2.n_cols();
  if (n_tokens > s.group->layout().max_tokens) {
    return invalid_argument("ep moe (CUDA): " + std::to_string(n_tokens) +
                            " tokens, the symmetric buffers hold " +
                            std::to_string(s.group->layout().max_tokens));
  }
  DSV4_CUDA_CHECK(cudaSetDevice(s.rank));
  const moe::MoeWorkspace ws = route(s, io);
  DSV4_RETURN_IF_ERROR(agree_decode(s, kInputAmax, {io.x}, EpPhase::kInputScale));
  DSV4_RETURN_IF_ERROR(publish(s, io, ws));
  launch_receive_plan(s.peer_set(), s.rank, s.cfg.n_expert_used, s.sharding, s.tables_view());
  DSV4_RETURN_IF_ERROR(s.group->wait(s.rank, "dispatch plan"));
  const int n_recv = s.totals[0], n_rows = s.totals[1];
  DSV4_ASSIGN_OR_RETURN(TensorView act, routed_gate_up(s, n_recv, n_rows));
  DSV4_RETURN_IF_ERROR(shared_gate_up(s, n_tokens));
  DSV4_RETURN_IF_ERROR(agree_decode(s, kHiddenAmax,
                                    {act, s.view(s.shared.act, DType::kF32, {n_tokens, f})},
                                    EpPhase::kHiddenScale));
  DSV4_RETURN_IF_ERROR(down_and_return(s, act, n_tokens, ws));
  if (s.transport == Transport::kPeer) s.group->barrier(s.rank, EpPhase::kCombine);
  if (n_tokens == 0) return s.group->wait(s.rank, "moe layer");
  moe::launch_combine(s.group->buffers()[s.rank].combine_rows(),
                      s.at<int32_t>(s.router + ws.row_of), s.at<float>(s.router + ws.sel_weight),
                      static_cast<int>(n_tokens), s.cfg.n_expert_used, static_cast<int>(ws.dim),
                      io.y.data_as<float>(), cudaStreamPerThread);
  return s.group->wait(s.rank, "moe layer");
}

}  // namespace dsv4::kernels::ep::cuda

#include "runtime/expert_shards.h"

#include <string>
#include <utility>

#include "base/buffer.h"
#include "base/device.h"
#include "kernels/ep/moe_pieces.h"

namespace dsv4::runtime {
namespace {

// Matrices [first, first + count) of `stack` copied into fresh tensors on `device` (the current
// GPU for kCuda). The calibrated input scales stay with the model: the leader stages with them.
Status copy_range(const format::Nvfp4Tensor& stack, int64_t first, int64_t count, Device device,
                  format::Nvfp4Tensor& to) {
  const std::pair<const Tensor*, Tensor*> parts[] = {{&stack.packed, &to.packed},
                                                     {&stack.block_scale, &to.block_scale},
                                                     {&stack.global_scale, &to.global_scale}};
  for (const auto& [from, into] : parts) {
    const TensorView range = from->view().rows(first, first + count);
    DSV4_ASSIGN_OR_RETURN(*into, Tensor::empty(range.dtype, range.shape, device));
    DSV4_RETURN_IF_ERROR(copy_tensor(into->view(), range));
  }
  to.scale_layout = stack.scale_layout;
  return ok_status();
}

// A layer whose stacks hold other than the `n_experts` the ranks shard is not the ranks'.
Status check_expert_count(int64_t layer, int64_t w13, int64_t w2, int64_t n_experts) {
  if (w13 == n_experts && w2 == n_experts) return ok_status();
  return invalid_argument("expert parallelism: layer " + std::to_string(layer) + " has " +
                          std::to_string(w13) + " routed experts, the ranks shard " +
                          std::to_string(n_experts));
}

}  // namespace

ExpertShards ExpertShards::for_ranks(const kernels::ep::ExpertSharding& sharding,
                                     const std::vector<int>& devices) {
  DSV4_CHECK(devices.empty() || static_cast<int>(devices.size()) == sharding.n_ranks(),
             "expert shards: %zu devices for %d ranks", devices.size(), sharding.n_ranks());
  ExpertShards shards(sharding);
  shards.ranks_.resize(static_cast<size_t>(sharding.n_ranks()));
  for (size_t r = 0; r < devices.size(); ++r) shards.ranks_[r].device = devices[r];
  return shards;
}

Result<ExpertShards> ExpertShards::copy(const checkpoint::ModelWeights& weights,
                                        const kernels::ep::ExpertSharding& sharding,
                                        const std::vector<int>& devices) {
  ExpertShards shards = for_ranks(sharding, devices);
  for (size_t l = 0; l < weights.layers.size(); ++l) {
    const checkpoint::RoutedExpertWeights& experts = weights.layers[l].ffn.experts;
    if (!experts.is_nvfp4()) continue;
    DSV4_RETURN_IF_ERROR(shards.copy_layer(static_cast<int64_t>(l), experts));
  }
  return shards;
}

Status ExpertShards::copy_layer(int64_t layer, const checkpoint::RoutedExpertWeights& experts) {
  DSV4_CHECK(copied() && layer >= 0 && experts.is_nvfp4(),
             "expert shards: layer %lld copied without ranks or NVFP4 stacks",
             static_cast<long long>(layer));
  DSV4_RETURN_IF_ERROR(check_expert_count(layer, experts.w13_nvfp4->n_matrices(),
                                          experts.w2_nvfp4->n_matrices(), sharding_.n_experts()));
  const int was = current_device();
  // Rank r's copy, made with its GPU current so that it comes from that GPU's memory.
  const auto copy_rank = [&](int r) -> Status {
    Rank& rank = ranks_[static_cast<size_t>(r)];
    const bool on_gpu = rank.device >= 0;
    if (on_gpu) DSV4_RETURN_IF_ERROR(use_device(rank.device));
    if (rank.layers.size() <= static_cast<size_t>(layer)) {
      rank.layers.resize(static_cast<size_t>(layer) + 1);
    }
    Stacks& own = rank.layers[static_cast<size_t>(layer)];
    for (const auto& [stack, to] : {std::pair{&*experts.w13_nvfp4, &own.w13},
                                    std::pair{&*experts.w2_nvfp4, &own.w2}}) {
      const Status copied =
          copy_range(*stack, sharding_.first_expert(r), sharding_.n_local_experts(r),
                     on_gpu ? Device::kCuda : Device::kCpu, *to);
      if (!copied.ok()) {
        return Status(copied.code(),
                      "expert parallelism: rank " + std::to_string(r) + "'s experts of layer " +
                          std::to_string(layer) +
                          (on_gpu ? " on GPU " + std::to_string(rank.device) : "") + ": " +
                          copied.message());
      }
    }
    // The rank threads read the copy, and the caller may free its source: it must be there,
    // not just queued.
    return on_gpu ? finish_device_work() : ok_status();
  };
  for (int r = 0; r < sharding_.n_ranks(); ++r) {
    const Status copied = copy_rank(r);
    if (ranks_[static_cast<size_t>(r)].device >= 0) DSV4_RETURN_IF_ERROR(use_device(was));
    DSV4_RETURN_IF_ERROR(copied);
  }
  return ok_status();
}

Status ExpertShards::take_layer(int64_t layer, checkpoint::RoutedExpertWeights& experts) {
  DSV4_RETURN_IF_ERROR(copy_layer(layer, experts));
  for (format::Nvfp4Tensor* stack : {&*experts.w13_nvfp4, &*experts.w2_nvfp4}) {
    stack->packed = Tensor();
    stack->block_scale = Tensor();
  }
  experts.in_host_memory = false;
  return ok_status();
}

std::vector<int> ExpertShards::devices() const {
  std::vector<int> out;
  for (const Rank& rank : ranks_) out.push_back(rank.device);
  return out;
}

ExpertShards::~ExpertShards() {
  bool on_gpus = false;
  for (const Rank& rank : ranks_) on_gpus = on_gpus || rank.device >= 0;
  if (!on_gpus) return;
  const int was = current_device();
  for (Rank& rank : ranks_) {
    if (rank.device < 0) continue;  // a copy that failed before this rank's turn
    (void)use_device(rank.device);  // nowhere to report a failure at teardown
    rank.layers.clear();
  }
  (void)use_device(was);
}

Result<const ExpertShards::Stacks*> ExpertShards::own_copy(const model::RoutedExpertsCall& call,
                                                           int rank) const {
  const std::string layer = std::to_string(call.layer);
  const std::vector<Stacks>& layers = ranks_[static_cast<size_t>(rank)].layers;
  const Stacks* own = call.layer >= 0 && call.layer < static_cast<int64_t>(layers.size())
                          ? &layers[static_cast<size_t>(call.layer)]
                          : nullptr;
  if (own == nullptr || own->w13.packed.empty_tensor()) {
    return internal_error("expert parallelism: rank " + std::to_string(rank) +
                          " holds no copy of layer " + layer + "'s experts");
  }
  const auto same_matrices = [](const format::Nvfp4Tensor& a, const format::Nvfp4View& b) {
    return a.n_rows() == b.n_rows() && a.n_cols() == b.n_cols() && a.scale_layout == b.scale_layout;
  };
  if (!same_matrices(own->w13, call.weights.w13) || !same_matrices(own->w2, call.weights.w2)) {
    return invalid_argument("expert parallelism: layer " + layer +
                            "'s experts are not shaped as those the ranks copied");
  }
  return own;
}

Result<kernels::MoeWeightsView> ExpertShards::rank_view(const model::RoutedExpertsCall& call,
                                                        int rank) const {
  const int64_t first = sharding_.first_expert(rank), n_experts = sharding_.n_experts();
  DSV4_RETURN_IF_ERROR(check_expert_count(call.layer, call.weights.w13.n_matrices(),
                                          call.weights.w2.n_matrices(), n_experts));
  kernels::MoeWeightsView view = call.weights;
  if (!copied()) {
    view = kernels::ep::slice_experts(call.weights, first, sharding_.n_local_experts(rank));
  } else {
    DSV4_ASSIGN_OR_RETURN(const Stacks* own, own_copy(call, rank));
    view.w13 = own->w13.view();
    view.w2 = own->w2.view();
  }
  view.w13 = kernels::ep::shard_as_stack(view.w13, first, n_experts);
  view.w2 = kernels::ep::shard_as_stack(view.w2, first, n_experts);
  return view;
}

Result<model::RoutedExpertsCall> ExpertShards::sized(const model::RoutedExpertsCall& call) const {
  if (!copied() || call.weights.w13.packed.data != nullptr) return call;
  const std::vector<Stacks>& layers = ranks_.front().layers;
  if (call.layer < 0 || call.layer >= static_cast<int64_t>(layers.size()) ||
      layers[static_cast<size_t>(call.layer)].w13.packed.empty_tensor()) {
    return internal_error("expert parallelism: layer " + std::to_string(call.layer) +
                          "'s experts were freed, and the ranks hold no copy of them");
  }
  // Rank 0's copy holds the stacks' matrices' shapes; the stacks hold n_experts of them.
  const Stacks& own = layers[static_cast<size_t>(call.layer)];
  model::RoutedExpertsCall whole = call;
  for (auto [bulk, copy] : {std::pair{&whole.weights.w13.packed, &own.w13.packed},
                            std::pair{&whole.weights.w13.block_scale, &own.w13.block_scale},
                            std::pair{&whole.weights.w2.packed, &own.w2.packed},
                            std::pair{&whole.weights.w2.block_scale, &own.w2.block_scale}}) {
    *bulk = copy->view();
    bulk->data = nullptr;
    bulk->shape[0] = sharding_.n_experts();
  }
  return whole;
}

Status ExpertShards::gather(const model::RoutedExpertsCall& call, kernels::MoeWeightsView& view,
                            std::vector<Tensor>& keep) const {
  DSV4_CHECK(copied(), "expert shards: gather without copies");
  DSV4_RETURN_IF_ERROR(check_expert_count(call.layer, call.weights.w13.n_matrices(),
                                          call.weights.w2.n_matrices(), sharding_.n_experts()));
  view = call.weights;
  // The whole stacks' codes and block scales; the per-matrix scales are the call's, on the GPU.
  std::vector<Tensor> whole;
  for (const format::Nvfp4View* stack : {&view.w13, &view.w2}) {
    for (const TensorView* bulk : {&stack->packed, &stack->block_scale}) {
      DSV4_ASSIGN_OR_RETURN(Tensor made, Tensor::empty(bulk->dtype, bulk->shape, Device::kCuda));
      whole.push_back(std::move(made));
    }
  }
  for (int r = 0; r < sharding_.n_ranks(); ++r) {
    DSV4_ASSIGN_OR_RETURN(const Stacks* own, own_copy(call, r));
    const int64_t first = sharding_.first_expert(r), end = first + sharding_.n_local_experts(r);
    const Tensor* parts[] = {&own->w13.packed, &own->w13.block_scale, &own->w2.packed,
                             &own->w2.block_scale};
    for (size_t p = 0; p < whole.size(); ++p) {
      DSV4_RETURN_IF_ERROR(copy_tensor(whole[p].view().rows(first, end), parts[p]->view()));
    }
  }
  view.w13.packed = whole[0].view(), view.w13.block_scale = whole[1].view();
  view.w2.packed = whole[2].view(), view.w2.block_scale = whole[3].view();
  for (Tensor& t : whole) keep.push_back(std::move(t));
  return ok_status();
}

}  // namespace dsv4::runtime

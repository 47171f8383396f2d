#include "runtime/ep_memory_plan.h"

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <numeric>

#include "base/check.h"
#include "checkpoint/tensor_names.h"
#include "kernels/ep/expert_sharding.h"

namespace dsv4::runtime {
namespace {

using checkpoint::Storage;

// Device bytes of one slot: NVFP4 codes (½ byte a value), UE4M3 block scales (1 per 16) and an
// f32 global scale per matrix for experts; 8-byte ids; a linear the release stores in FP8, when
// the config declares those (ModelConfig::fp8_linears), a byte a value and an f32 scale per
// 128 × 128 block, as a GPU keeps it; at least a bf16 for every other value.
int64_t slot_bytes(const checkpoint::ModelConfig& config, const checkpoint::SlotSpec& spec,
                   const Shape& shape) {
  const int64_t n = shape.numel();
  switch (spec.storage) {
    case Storage::kExperts:
      return n / 2 + n / format::kNvfp4BlockSize + 4 * shape[0];
    case Storage::kIndex:
      return 8 * n;
    case Storage::kLinear:
      if (config.fp8_linears && spec.release_dtype == DType::kF8E4M3 && n > 0) {
        const int64_t rows = shape[0], cols = n / rows;
        return n + 4 * ((rows + 127) / 128) * ((cols + 127) / 128);
      }
      return 2 * n;
    case Storage::kFloat:
    case Storage::kMatrix:
      return 2 * n;
  }
  return 2 * n;
}

// Each layer's routed experts, E: the ranks' shares added up.
int64_t plan_experts(const EpMemoryPlan& plan) {
  int64_t n = 0;
  for (const RankBytes& rank : plan.ranks) n += rank.n_experts;
  return n;
}

// The ranks' bytes under `sharding`: each its experts' share of every layer's stacks, rank 0 also
// every other weight and (of several) the layer copy.
void place_shards(EpMemoryPlan& plan, const kernels::ep::ExpertSharding& sharding) {
  plan.ranks.clear();
  for (int r = 0; r < sharding.n_ranks(); ++r) {
    RankBytes rank{.first_expert = sharding.first_expert(r),
                   .n_experts = sharding.n_local_experts(r)};
    rank.experts = plan.routed_expert_bytes / sharding.n_experts() * rank.n_experts;
    rank.other_weights = r == 0 ? plan.other_weight_bytes : 0;
    rank.layer_copy = r == 0 ? plan.largest_layer : 0;
    plan.ranks.push_back(rank);
  }
}

// The plan of weights whose main layers' NVFP4 routed stacks take `routed` bytes (of them each
// main layer's codes and block scales `layer_bulk`), each layer's `n_experts` split evenly over
// `n_ranks`, and `other` bytes besides, all rank 0's: the MTP block's experts are not sharded
// (they load onto rank 0's GPU and run there), nor are dense ones (make_placement runs them on
// rank 0). Over several ranks the loader stages each layer's bulk in host memory in turn, and
// rank 0 keeps room to gather the largest layer.
Result<EpMemoryPlan> lay_out(int64_t n_experts, int n_ranks, int64_t routed, int64_t other,
                             const std::vector<int64_t>& layer_bulk) {
  DSV4_ASSIGN_OR_RETURN(const kernels::ep::ExpertSharding sharding,
                        kernels::ep::ExpertSharding::create(n_experts, n_ranks));
  EpMemoryPlan plan;
  plan.routed_expert_bytes = routed;
  plan.other_weight_bytes = other;
  if (n_ranks > 1) {
    for (const int64_t bulk : layer_bulk) plan.largest_layer = std::max(plan.largest_layer, bulk);
    plan.host_bytes = plan.largest_layer;
  }
  place_shards(plan, sharding);
  return plan;
}

// The first rank whose GPU (rank r's is devices[r], with free_bytes[r] free) cannot hold what it
// needs, rank 0 with `headroom`; the rank count when every one fits.
size_t first_rank_short(const EpMemoryPlan& plan, const std::vector<int>& devices,
                        const std::vector<int64_t>& free_bytes, int64_t headroom) {
  const size_t n_ranks = plan.ranks.size();
  DSV4_CHECK(devices.size() == n_ranks && free_bytes.size() == n_ranks,
             "check_ep_fits: %zu devices and %zu free sizes for %zu ranks", devices.size(),
             free_bytes.size(), n_ranks);
  for (size_t r = 0; r < n_ranks; ++r) {
    if (rank_device_bytes(plan, static_cast<int>(r), headroom) > free_bytes[r]) return r;
  }
  return n_ranks;
}

// The most any rank's GPU must hold, rank 0 with `headroom`.
int64_t fullest_rank_bytes(const EpMemoryPlan& plan, int64_t headroom) {
  int64_t largest = 0;
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    largest = std::max(largest, rank_device_bytes(plan, static_cast<int>(r), headroom));
  }
  return largest;
}

std::string gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

// Why rank r of `plan` does not fit its GPU (first_rank_short's): the bytes it needs, part by
// part, and those its GPU has free; `what` follows the GPU count (", the checkpoint as bound").
std::string refusal(const EpMemoryPlan& plan, const std::string& what,
                    const std::vector<int>& devices, const std::vector<int64_t>& free_bytes,
                    int64_t headroom, size_t r) {
  const RankBytes& b = plan.ranks[r];
  const int64_t need = rank_device_bytes(plan, static_cast<int>(r), headroom);
  std::string parts = "its experts " + std::to_string(b.first_expert) + "-" +
                      std::to_string(b.first_expert + b.n_experts - 1) + " of every layer " +
                      gib(b.experts);
  if (r == 0) {
    parts += ", every other weight " + gib(b.other_weights) + ", room to gather a layer " +
             gib(b.layer_copy) + ", caches and scratch " + gib(headroom);
  }
  const std::string gpu = "GPU " + std::to_string(devices[r]);
  return "expert parallelism over " + std::to_string(plan.ranks.size()) + " GPUs" + what +
         ": rank " + std::to_string(r) + " on " + gpu + " needs " + gib(need) + " (" + parts +
         "), and " + gpu + " has " + gib(free_bytes[r]) + " free (" + std::to_string(need) +
         " bytes needed, " + std::to_string(free_bytes[r]) + " free)";
}

}  // namespace

Result<EpMemoryPlan> plan_ep_memory(const checkpoint::ModelConfig& config, int n_ranks) {
  int64_t routed = 0, other = 0;
  std::vector<int64_t> layer_bulk;  // each main layer's routed codes and block scales
  for (int64_t layer = -1; layer < config.n_layer + config.n_mtp_layers; ++layer) {
    const bool main = layer >= 0 && layer < config.n_layer;
    int64_t bulk = 0;
    for (const checkpoint::SlotSpec* spec : checkpoint::block_slots(config, layer)) {
      const Shape shape = checkpoint::slot_shape(spec->param, config, layer);
      const int64_t bytes = slot_bytes(config, *spec, shape);
      if (spec->storage == Storage::kExperts && main) {
        routed += bytes;
        bulk += bytes - 4 * shape[0];  // the per-matrix global scales stay on the GPU
      } else {
        other += bytes;
      }
    }
    if (main) layer_bulk.push_back(bulk);
  }
  return lay_out(config.n_routed_experts, n_ranks, routed, other, layer_bulk);
}

Result<EpMemoryPlan> plan_ep_memory(const checkpoint::LoadPlan& bound, int64_t n_experts,
                                    int n_ranks) {
  DSV4_CHECK(bound.expert_packed_bytes.size() == bound.expert_bulk_bytes.size(),
             "plan_ep_memory: %zu layers' packed bytes and %zu layers' bulk",
             bound.expert_packed_bytes.size(), bound.expert_bulk_bytes.size());
  const auto n_main = static_cast<std::ptrdiff_t>(std::min(
      bound.expert_bulk_bytes.size(), static_cast<size_t>(std::max<int64_t>(bound.n_layer, 0))));
  const int64_t routed = std::accumulate(bound.expert_packed_bytes.begin(),
                                         bound.expert_packed_bytes.begin() + n_main, int64_t{0});
  return lay_out(n_experts, n_ranks, routed, bound.min_device_bytes() - routed,
                 {bound.expert_bulk_bytes.begin(), bound.expert_bulk_bytes.begin() + n_main});
}

Result<EpMemoryPlan> with_leader_experts(const EpMemoryPlan& plan, int64_t leader_experts) {
  DSV4_ASSIGN_OR_RETURN(const kernels::ep::ExpertSharding sharding,
                        kernels::ep::ExpertSharding::with_leader(
                            plan_experts(plan), static_cast<int>(plan.ranks.size()),
                            leader_experts));
  EpMemoryPlan weighted = plan;
  place_shards(weighted, sharding);
  return weighted;
}

int64_t leader_experts_to_fit(const EpMemoryPlan& plan, int64_t rank0_free, int64_t headroom) {
  const RankBytes& leader = plan.ranks.front();
  if (plan.ranks.size() < 2 || rank_device_bytes(plan, 0, headroom) <= rank0_free) {
    return leader.n_experts;
  }
  const int64_t per_expert = plan.routed_expert_bytes / plan_experts(plan);
  const int64_t room = rank0_free - leader.other_weights - leader.layer_copy - headroom;
  return std::clamp<int64_t>(per_expert > 0 ? room / per_expert : 0, 1, leader.n_experts);
}

int64_t rank_device_bytes(const EpMemoryPlan& plan, int rank, int64_t headroom) {
  return plan.ranks[static_cast<size_t>(rank)].total() + (rank == 0 ? headroom : 0);
}

Status check_ep_fits(const EpMemoryPlan& plan, const std::vector<int>& devices,
                     const std::vector<int64_t>& free_bytes, int64_t headroom) {
  const size_t r = first_rank_short(plan, devices, free_bytes, headroom);
  if (r == plan.ranks.size()) return ok_status();
  return resource_exhausted(refusal(plan, "", devices, free_bytes, headroom, r));
}

Status check_bound_ep_fits(const EpMemoryPlan& bound, const EpMemoryPlan& declared,
                           const std::vector<int>& devices, const std::vector<int64_t>& free_bytes,
                           int64_t headroom) {
  DSV4_CHECK(declared.ranks.size() == bound.ranks.size(),
             "check_bound_ep_fits: %zu ranks declared, %zu bound", declared.ranks.size(),
             bound.ranks.size());
  const size_t r = first_rank_short(bound, devices, free_bytes, headroom);
  if (r == bound.ranks.size()) return ok_status();
  std::string message =
      refusal(bound, ", the checkpoint as bound", devices, free_bytes, headroom, r);
  const RankBytes &as_bound = bound.ranks[r], &planned = declared.ranks[r];
  if (as_bound.total() > planned.total()) {
    std::string parts;
    const auto compare = [&](const char* what, int64_t got, int64_t want) {
      if (got == want) return;
      parts +=
          std::string(parts.empty() ? "" : ", ") + what + " " + gib(got) + " against " + gib(want);
    };
    compare("its experts", as_bound.experts, planned.experts);
    compare("every other weight", as_bound.other_weights, planned.other_weights);
    compare("room to gather a layer", as_bound.layer_copy, planned.layer_copy);
    if (as_bound.other_weights > planned.other_weights) {
      parts +=
          "; a linear the config declares FP8 but the checkpoint stores in bf16 takes about "
          "twice its bytes";
    }
    message += "; the checkpoint stores more than its config declares: rank " + std::to_string(r) +
               " needs " + std::to_string(as_bound.total() - planned.total()) +
               " bytes more than the config's plan gave it (" + parts + ")";
  }
  message += "; the split chosen before loading, from the config (rank 0 owning " +
             std::to_string(bound.ranks.front().n_experts) +
             " experts of each layer), does not hold for the checkpoint as bound";
  return resource_exhausted(message);
}

std::string describe(const EpMemoryPlan& plan, int64_t headroom) {
  std::string out = "expert parallelism over " + std::to_string(plan.ranks.size()) +
                    " ranks: routed experts " + gib(plan.routed_expert_bytes) +
                    " sharded by expert, every other weight " + gib(plan.other_weight_bytes) +
                    " on rank 0 (the leader, which also holds the caches)";
  if (plan.host_bytes > 0) {
    out += "; each layer's experts load into pinned host memory in turn, whence each rank "
           "copies its share before the next layer loads; rank 0 keeps room to gather one "
           "layer whole from the ranks (steps beyond the fused kernels run every expert "
           "there)\nhost memory: " +
           gib(plan.host_bytes) +
           " pinned at a time while loading (one layer's codes and scales), " +
           gib(plan.host_bytes_kept) + " kept after (the ranks' copies serve every read)";
  }
  out += "\n";
  char line[160];
  std::snprintf(line, sizeof line, "%-5s %-10s %12s %14s %12s %12s\n", "rank", "experts",
                "expert bytes", "other weights", "layer copy", "total");
  out += line;
  for (size_t r = 0; r < plan.ranks.size(); ++r) {
    const RankBytes& b = plan.ranks[r];
    const std::string experts =
        std::to_string(b.first_expert) + "-" + std::to_string(b.first_expert + b.n_experts - 1);
    std::snprintf(line, sizeof line, "%-5zu %-10s %12s %14s %12s %12s\n", r, experts.c_str(),
                  gib(b.experts).c_str(), gib(b.other_weights).c_str(), gib(b.layer_copy).c_str(),
                  gib(b.total()).c_str());
    out += line;
  }
  for (const GpuKind& gpu : kPlanGpus) {
    // Where the even split's rank 0 passes the GPU, the split that sheds its experts.
    EpMemoryPlan laid = plan;
    const int64_t leader = leader_experts_to_fit(plan, gpu.bytes, headroom);
    if (leader != plan.ranks.front().n_experts) laid = with_leader_experts(plan, leader).value();
    const int64_t largest = fullest_rank_bytes(laid, headroom);
    std::string how = largest > gpu.bytes ? "does not fit" : "fits";
    if (largest <= gpu.bytes && leader != plan.ranks.front().n_experts) {
      how += " with rank 0 owning " + std::to_string(leader) + " experts of each layer (" +
             std::to_string(laid.ranks.back().n_experts) + "-" +
             std::to_string(laid.ranks[1].n_experts) + " on each other rank)";
    }
    out += std::to_string(plan.ranks.size()) + " x " + gpu.name + " (" + gib(gpu.bytes) +
           " each): " + how + ", the fullest rank needs " + gib(largest) + " with " +
           gib(headroom) + " for caches and scratch on rank 0\n";
  }
  return out;
}

}  // namespace dsv4::runtime

#include "runtime/ep_memory_plan.h"

#include <algorithm>
#include <cstdio>

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

}  // namespace

Result<EpMemoryPlan> plan_ep_memory(const checkpoint::ModelConfig& config, int n_ranks) {
  DSV4_ASSIGN_OR_RETURN(const kernels::ep::ExpertSharding sharding,
                        kernels::ep::ExpertSharding::create(config.n_routed_experts, n_ranks));
  EpMemoryPlan plan;
  const bool staged = n_ranks > 1;  // the loader leaves every NVFP4 stack's bulk in host memory
  int64_t largest_layer = 0;        // one main layer's routed codes and block scales
  for (int64_t layer = -1; layer < config.n_layer + config.n_mtp_layers; ++layer) {
    int64_t layer_bulk = 0;
    for (const checkpoint::SlotSpec* spec : checkpoint::block_slots(config, layer)) {
      const Shape shape = checkpoint::slot_shape(spec->param, config, layer);
      const int64_t bytes = slot_bytes(config, *spec, shape);
      // Codes and block scales; the per-matrix global scales stay on the GPU.
      const int64_t bulk = spec->storage == Storage::kExperts ? bytes - 4 * shape[0] : 0;
      if (spec->storage == Storage::kExperts && layer >= 0 && layer < config.n_layer) {
        plan.routed_expert_bytes += bytes;
        layer_bulk += bulk;
        if (staged) plan.host_bytes += bulk;
      } else {
        // The MTP block's experts are not sharded: they load onto rank 0's GPU and run there.
        plan.other_weight_bytes += bytes;
      }
    }
    largest_layer = std::max(largest_layer, layer_bulk);
  }
  plan.largest_layer = staged ? largest_layer : 0;
  place_shards(plan, sharding);
  return plan;
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
  const size_t n_ranks = plan.ranks.size();
  DSV4_CHECK(devices.size() == n_ranks && free_bytes.size() == n_ranks,
             "check_ep_fits: %zu devices and %zu free sizes for %zu ranks", devices.size(),
             free_bytes.size(), n_ranks);
  for (size_t r = 0; r < n_ranks; ++r) {
    const RankBytes& b = plan.ranks[r];
    const int64_t need = rank_device_bytes(plan, static_cast<int>(r), headroom);
    if (need <= free_bytes[r]) continue;
    std::string parts = "its experts " + std::to_string(b.first_expert) + "-" +
                        std::to_string(b.first_expert + b.n_experts - 1) + " of every layer " +
                        gib(b.experts);
    if (r == 0) {
      parts += ", every other weight " + gib(b.other_weights) + ", room to gather a layer " +
               gib(b.layer_copy) + ", caches and scratch " + gib(headroom);
    }
    const std::string gpu = "GPU " + std::to_string(devices[r]);
    return resource_exhausted("expert parallelism over " + std::to_string(n_ranks) +
                              " GPUs: rank " + std::to_string(r) + " on " + gpu + " needs " +
                              gib(need) + " (" + parts + "), and " + gpu + " has " +
                              gib(free_bytes[r]) + " free (" + std::to_string(need) +
                              " bytes needed, " + std::to_string(free_bytes[r]) + " free)");
  }
  return ok_status();
}

std::string describe(const EpMemoryPlan& plan, int64_t headroom) {
  std::string out = "expert parallelism over " + std::to_string(plan.ranks.size()) +
                    " ranks: routed experts " + gib(plan.routed_expert_bytes) +
                    " sharded by expert, every other weight " + gib(plan.other_weight_bytes) +
                    " on rank 0 (the leader, which also holds the caches)";
  if (plan.host_bytes > 0) {
    out += "; the experts' " + gib(plan.host_bytes) +
           " of codes and scales load into pinned host memory, whence each rank copies its "
           "share; rank 0 keeps room to gather one layer whole from the ranks (steps beyond "
           "the fused kernels run every expert there)\nhost memory: " +
           gib(plan.host_bytes) + " pinned while loading, " + gib(plan.host_bytes_kept) +
           " kept after (the ranks' copies serve every read)";
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

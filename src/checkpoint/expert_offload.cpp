#include "checkpoint/expert_offload.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace dsv4::checkpoint {
namespace {

std::string gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  return std::string(text);
}

// What the weights take on the device under `offload`: the offloaded bulk goes, one layer's
// copy (for the steps that copy an offloaded layer back, runtime/offloaded_experts.cpp) comes.
int64_t device_bytes(const LoadPlan& plan, const ExpertOffloadPlan& offload) {
  return plan.min_device_bytes() - offload.host_bytes + offload.copy_bytes;
}

// The layers that have NVFP4 expert stacks, last first: the order they are offloaded in.
std::vector<size_t> offload_order(const LoadPlan& plan) {
  std::vector<size_t> order;
  for (size_t l = plan.expert_bulk_bytes.size(); l-- > 0;) {
    if (plan.expert_bulk_bytes[l] > 0) order.push_back(l);
  }
  return order;
}

Status device_too_small(const LoadPlan& plan, const ExpertOffloadPlan& offload,
                        int64_t device_headroom, int64_t device_free, bool more_would_fit) {
  std::string message = "the checkpoint's weights need at least " + gib(plan.min_device_bytes()) +
                        " on the device (NVFP4 experts " + gib(plan.packed_expert_bytes) +
                        ", the other weights " + gib(2 * plan.value_elements) + " in bf16)";
  if (offload.layers() > 0) {
    message += ", " + gib(device_bytes(plan, offload)) + " with the experts of " +
               std::to_string(offload.layers()) + " layers (" + gib(offload.host_bytes) +
               ") in host memory and room to copy one back (" + gib(offload.copy_bytes) + ")";
  }
  message += ", and " + gib(device_headroom) + " for caches and scratch; the device has " +
             gib(device_free) + " free";
  if (more_would_fit) message += " (more layers' experts in host memory would make it fit)";
  return resource_exhausted(message);
}

}  // namespace

void ExpertOffloadPlan::add(const LoadPlan& plan, size_t layer) {
  offloaded[layer] = true;
  host_bytes += plan.expert_bulk_bytes[layer];
  copy_bytes = std::max(copy_bytes, plan.expert_bulk_bytes[layer]);
}

int64_t ExpertOffloadPlan::layers() const {
  return std::count(offloaded.begin(), offloaded.end(), true);
}

std::string ExpertOffloadPlan::describe() const {
  std::string which;
  for (size_t l = 0; l < offloaded.size(); ++l) {
    if (offloaded[l]) which += (which.empty() ? "" : ", ") + std::to_string(l);
  }
  return "expert offload: the NVFP4 routed experts of " + std::to_string(layers()) + " layers (" +
         which + "; " + gib(host_bytes) +
         ") are in mapped host memory, copied to the GPU as a step needs them";
}

Result<ExpertOffloadPlan> plan_expert_offload(const LoadPlan& plan, int64_t requested,
                                              int64_t device_free, int64_t device_headroom,
                                              int64_t host_free) {
  const std::vector<size_t> order = offload_order(plan);
  if (requested < kAutoExpertOffload) {
    return invalid_argument("expert offload of " + std::to_string(requested) +
                            " layers: a count of layers must be non-negative");
  }
  if (requested > static_cast<int64_t>(order.size())) {
    return invalid_argument("expert offload of " + std::to_string(requested) +
                            " layers: the checkpoint has " + std::to_string(order.size()) +
                            " layers with NVFP4 routed experts");
  }
  const bool automatic = requested == kAutoExpertOffload;
  const size_t limit = automatic ? order.size() : static_cast<size_t>(requested);
  const auto fits = [&](const ExpertOffloadPlan& offload) {
    return device_bytes(plan, offload) + device_headroom <= device_free;
  };
  ExpertOffloadPlan offload;
  offload.offloaded.assign(plan.expert_bulk_bytes.size(), false);
  for (size_t n = 0; n < limit && (!automatic || !fits(offload)); ++n) offload.add(plan, order[n]);
  if (!fits(offload)) {
    ExpertOffloadPlan all = offload;
    for (size_t n = limit; n < order.size(); ++n) all.add(plan, order[n]);
    return device_too_small(plan, offload, device_headroom, device_free,
                            limit < order.size() && fits(all));
  }
  if (offload.host_bytes > host_free) {
    return resource_exhausted("the routed experts of " + std::to_string(offload.layers()) +
                              " layers in host memory need " + gib(offload.host_bytes) +
                              " of pinned host memory; the host has " + gib(host_free) +
                              " available");
  }
  return offload;
}

}  // namespace dsv4::checkpoint

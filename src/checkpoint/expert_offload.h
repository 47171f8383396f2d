// Expert offload: the routed experts of some layers kept in pinned host memory that the GPU maps
// into its address space (Buffer::allocate_mapped_host), so a checkpoint larger than the GPU
// still runs on it. V4-Flash in NVFP4 needs ~184 GB and an H200 has 141 GB (architecture.md).
// Before an offloaded layer's experts run, a step copies them to the device
// (runtime/offloaded_experts.cpp): the experts it touches (~85 MB a V4-Flash layer at one token),
// or the whole layer from many tokens on, so it pays for those bytes at PCIe rates instead of HBM
// rates, and the plan keeps room for one layer's copy. Only the codes and block scales move (LoadPlan::expert_bulk_bytes); the
// per-matrix scales, which every kernel reads first, stay on the GPU. Which layers go does not
// change the cost; the last ones do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/loader.h"
#include "dsv4/status.h"

namespace dsv4::checkpoint {

// As few layers as make the weights fit (none when they fit as they are).
inline constexpr int64_t kAutoExpertOffload = -1;

struct ExpertOffloadPlan {
  std::vector<bool> offloaded;  // per layer (as many as LoadPlan::expert_bulk_bytes)
  int64_t host_bytes = 0;       // the offloaded codes and block scales
  // Device memory a step of many tokens copies an offloaded layer's stacks into
  // (runtime/offloaded_experts.cpp): the largest offloaded layer's bulk, kept free beside the
  // weights.
  int64_t copy_bytes = 0;
  void add(const LoadPlan& plan, size_t layer);
  int64_t layers() const;
  // For the load report: which layers, how many bytes.
  std::string describe() const;
};

// Which layers' NVFP4 expert stacks live in host memory. `requested`: kAutoExpertOffload, or a
// number of layers (the last ones with NVFP4 experts). The weights left on the device plus
// `device_headroom` (caches and a step's scratch) must fit `device_free`, and the offloaded bytes
// `host_free`; otherwise resource_exhausted says what needs how much. A request for more layers
// than have NVFP4 experts is invalid_argument.
Result<ExpertOffloadPlan> plan_expert_offload(const LoadPlan& plan, int64_t requested,
                                              int64_t device_free, int64_t device_headroom,
                                              int64_t host_free);

}  // namespace dsv4::checkpoint

// NCCL communicators for the expert-parallel baseline: one process, one communicator per GPU
// (ncclCommInitAll), NVLink multicast off (disable_nvlink_multicast() runs first). NCCL is
// linked dynamically (the toolkit ships only libnccl.so): binaries using it need libnccl.so.2
// next to them or on LD_LIBRARY_PATH on the GPU machine (docs/ep.md).
#pragma once

#include <memory>
#include <vector>

#include "dsv4/status.h"

namespace dsv4::kernels::ep::cuda {

class NcclGroup {
 public:
  static Result<std::unique_ptr<NcclGroup>> create(int n_ranks);
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  // ncclComm_t of rank r, kept opaque so this header needs no NCCL include.
  void* comm(int rank) const { return comms_[rank]; }

 private:
  NcclGroup() = default;
  std::vector<void*> comms_;
};

}  // namespace dsv4::kernels::ep::cuda

#include <nccl.h>

#include <string>

#include "kernels/ep/cuda/device_group.h"
#include "kernels/ep/cuda/nccl_group.h"

namespace dsv4::kernels::ep::cuda {

Result<std::unique_ptr<NcclGroup>> NcclGroup::create(int n_ranks) {
  disable_nvlink_multicast();  // before NCCL reads its environment
  std::vector<ncclComm_t> comms(n_ranks);
  const ncclResult_t r = ncclCommInitAll(comms.data(), n_ranks, nullptr);
  if (r != ncclSuccess) {
    return internal_error("ep: ncclCommInitAll over " + std::to_string(n_ranks) +
                          " GPUs: " + ncclGetErrorString(r));
  }
  std::unique_ptr<NcclGroup> g(new NcclGroup());
  for (ncclComm_t c : comms) g->comms_.push_back(c);
  return Result<std::unique_ptr<NcclGroup>>(std::move(g));
}

NcclGroup::~NcclGroup() {
  for (void* c : comms_) ncclCommDestroy(static_cast<ncclComm_t>(c));
}

}  // namespace dsv4::kernels::ep::cuda

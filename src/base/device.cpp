#include "base/device.h"

#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#ifdef DSV4_WITH_CUDA
#include <cuda_runtime_api.h>

#include "base/cuda_status.h"
#endif

namespace dsv4 {

std::vector<std::string> cuda_device_names() {
  std::vector<std::string> names;
#ifdef DSV4_WITH_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return names;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    names.push_back(cudaGetDeviceProperties(&prop, d) == cudaSuccess ? prop.name : "unknown GPU");
  }
#endif
  return names;
}

int current_device() {
  int ordinal = 0;
#ifdef DSV4_WITH_CUDA
  if (cudaGetDevice(&ordinal) != cudaSuccess) return 0;
#endif
  return ordinal;
}

Status use_device(int ordinal) {
#ifdef DSV4_WITH_CUDA
  const std::string what = "cudaSetDevice(" + std::to_string(ordinal) + ")";
  return cuda_status(cudaSetDevice(ordinal), what.c_str());
#else
  if (ordinal == 0) return ok_status();
  return unimplemented("device " + std::to_string(ordinal) +
                       ": this build of dsv4 has no CUDA support");
#endif
}

Status enable_peer_access(int device, int peer) {
  if (device == peer) return ok_status();
#ifdef DSV4_WITH_CUDA
  int can = 0;
  const std::string asked =
      "cudaDeviceCanAccessPeer(" + std::to_string(device) + ", " + std::to_string(peer) + ")";
  DSV4_RETURN_IF_ERROR(cuda_status(cudaDeviceCanAccessPeer(&can, device, peer), asked.c_str()));
  if (!can) {
    return unimplemented("GPU " + std::to_string(device) + " has no peer access to GPU " +
                         std::to_string(peer) +
                         "'s memory, and dsv4 does not stage transfers through the host");
  }
  const int was = current_device();
  DSV4_RETURN_IF_ERROR(use_device(device));
  cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    (void)cudaGetLastError();  // a later cudaGetLastError must not see it
    err = cudaSuccess;
  }
  DSV4_RETURN_IF_ERROR(use_device(was));
  const std::string enabled = "cudaDeviceEnablePeerAccess(" + std::to_string(peer) +
                              ") on GPU " + std::to_string(device);
  return cuda_status(err, enabled.c_str());
#else
  return unimplemented("peer access between devices " + std::to_string(device) + " and " +
                       std::to_string(peer) + ": this build of dsv4 has no CUDA support");
#endif
}

Result<int64_t> free_device_bytes(Device device) {
  if (device == Device::kCpu) {
    // MemAvailable counts the page cache the kernel would give back (a checkpoint's files just
    // read, say), which free pages (_SC_AVPHYS_PAGES) leave out; the latter where /proc is absent.
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    int64_t kib = 0;
    while (meminfo >> key >> kib) {
      if (key == "MemAvailable:") return kib * 1024;
      meminfo.ignore(64, '\n');
    }
    return static_cast<int64_t>(sysconf(_SC_AVPHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  }
#ifdef DSV4_WITH_CUDA
  size_t free = 0, total = 0;
  const cudaError_t err = cudaMemGetInfo(&free, &total);
  if (err != cudaSuccess) {
    // not_found, not cuda_status's internal error: the caller asked about a GPU there is none of.
    return not_found(std::string("no usable CUDA device (cudaMemGetInfo: ") +
                     cudaGetErrorString(err) + ")");
  }
  return static_cast<int64_t>(free);
#else
  return unimplemented("this build of dsv4 has no CUDA support");
#endif
}

Result<int64_t> idle_pool_bytes(Device device) {
  if (device == Device::kCpu) return int64_t{0};
#ifdef DSV4_WITH_CUDA
  const int ordinal = current_device();
  int has_pools = 0;
  DSV4_RETURN_IF_ERROR(
      cuda_status(cudaDeviceGetAttribute(&has_pools, cudaDevAttrMemoryPoolsSupported, ordinal),
                  "cudaDeviceGetAttribute(MemoryPoolsSupported)"));
  if (has_pools == 0) return int64_t{0};
  cudaMemPool_t pool;
  DSV4_RETURN_IF_ERROR(
      cuda_status(cudaDeviceGetDefaultMemPool(&pool, ordinal), "cudaDeviceGetDefaultMemPool"));
  uint64_t reserved = 0, used = 0;
  DSV4_RETURN_IF_ERROR(
      cuda_status(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved),
                  "cudaMemPoolGetAttribute(ReservedMemCurrent)"));
  DSV4_RETURN_IF_ERROR(
      cuda_status(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used),
                  "cudaMemPoolGetAttribute(UsedMemCurrent)"));
  return static_cast<int64_t>(reserved - used);
#else
  return int64_t{0};
#endif
}

Status finish_device_work() {
#ifdef DSV4_WITH_CUDA
  return cuda_status(cudaStreamSynchronize(cudaStreamPerThread), "cudaStreamSynchronize");
#else
  return ok_status();
#endif
}

}  // namespace dsv4

#include "base/device_graph.h"

#include "base/check.h"

#include <string>
#include <utility>

#ifdef DSV4_WITH_CUDA
#include <cuda_runtime_api.h>

#include "base/cuda_status.h"
#endif

namespace dsv4 {

DeviceGraph::DeviceGraph(DeviceGraph&& other) noexcept
    : exec_(std::exchange(other.exec_, nullptr)) {}

DeviceGraph& DeviceGraph::operator=(DeviceGraph&& other) noexcept {
  if (this != &other) {
    DeviceGraph dropped(std::move(*this));
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

#ifdef DSV4_WITH_CUDA
DeviceGraph::~DeviceGraph() {
  // Errors at teardown have nowhere to go; the context may be gone already.
  if (exec_ != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
}

Result<DeviceGraph> DeviceGraph::capture(const std::function<Status()>& work) {
  // Relaxed: the ops' one-time setup (cudaFuncSetAttribute, module loading) may run inside.
  DSV4_RETURN_IF_ERROR(cuda_status(
      cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeRelaxed),
      "cudaStreamBeginCapture"));
  const Status worked = work();
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(cudaStreamPerThread, &graph);
  // A capture that went wrong leaves an error sticky on the thread until read.
  cudaGetLastError();
  if (!worked.ok()) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    return worked;
  }
  DSV4_RETURN_IF_ERROR(cuda_status(ended, "cudaStreamEndCapture"));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  DSV4_RETURN_IF_ERROR(cuda_status(made, "cudaGraphInstantiate"));
  DeviceGraph captured;
  captured.exec_ = exec;
  return captured;
}

Status DeviceGraph::launch() const {
  DSV4_CHECK(exec_ != nullptr, "launching an empty DeviceGraph");
  return cuda_status(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), cudaStreamPerThread),
                     "cudaGraphLaunch");
}

Result<int64_t> DeviceGraph::reserved_bytes() {
  int device = 0;
  DSV4_RETURN_IF_ERROR(cuda_status(cudaGetDevice(&device), "cudaGetDevice"));
  uint64_t bytes = 0;
  DSV4_RETURN_IF_ERROR(cuda_status(
      cudaDeviceGetGraphMemAttribute(device, cudaGraphMemAttrReservedMemCurrent, &bytes),
      "cudaDeviceGetGraphMemAttribute"));
  return static_cast<int64_t>(bytes);
}
#else
DeviceGraph::~DeviceGraph() = default;

Result<DeviceGraph> DeviceGraph::capture(const std::function<Status()>&) {
  return unimplemented("this build of dsv4 has no CUDA support");
}

Status DeviceGraph::launch() const {
  return unimplemented("this build of dsv4 has no CUDA support");
}

Result<int64_t> DeviceGraph::reserved_bytes() { return int64_t{0}; }
#endif

}  // namespace dsv4

// A CUDA graph: the work one thread enqueues on its stream (cudaStreamPerThread, where every
// dsv4 op runs), captured once without running it and then launched whole, one host call for
// the hundreds of kernels a decode step is (model/decode_graph.h). CPU builds have none.
#pragma once

#include <cstdint>
#include <functional>

#include "dsv4/status.h"

namespace dsv4 {

class DeviceGraph {
 public:
  DeviceGraph() = default;
  DeviceGraph(DeviceGraph&& other) noexcept;
  DeviceGraph& operator=(DeviceGraph&& other) noexcept;
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;
  ~DeviceGraph();

  // What `work` enqueues on this thread's stream, captured (nothing runs) and instantiated. The
  // host side of `work` does run. A `work` that fails, or enqueues what a graph cannot hold,
  // leaves no graph and the stream out of capture.
  static Result<DeviceGraph> capture(const std::function<Status()>& work);

  // Enqueues the captured work on this thread's stream. A graph's allocations get their memory
  // at its first launch: resource_exhausted when the device has none left.
  Status launch() const;

  // Device memory the current device's graph memory pool holds for every graph's allocations
  // (cudaGraphMemAttrReservedMemCurrent): what the captured steps' activations take.
  static Result<int64_t> reserved_bytes();

 private:
  void* exec_ = nullptr;  // cudaGraphExec_t
};

}  // namespace dsv4

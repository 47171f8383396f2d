// The CUDA devices a process sees and which one a thread runs on: their names, the calling
// thread's device, peer access between two of them, the memory one has left, and waiting for
// the work a thread has queued. A build without CUDA answers as a host with no GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/tensor.h"
#include "dsv4/status.h"

namespace dsv4 {

// The CUDA devices this process sees, by name ("NVIDIA H200"), in device order; none in a build
// without CUDA or on a machine without a usable GPU.
std::vector<std::string> cuda_device_names();

// The calling thread's current CUDA device (0 in a build without CUDA), and making `ordinal` the
// calling thread's: an expert-parallel rank thread runs on its rank's device.
int current_device();
Status use_device(int ordinal);

// Lets kernels on device `device` read and write memory allocated on device `peer`
// (cudaDeviceEnablePeerAccess); nothing to do when they are the same device. unimplemented when
// the pair has no peer access, naming both.
Status enable_peer_access(int device, int peer);

// Bytes `device` can still allocate: a GPU's free memory (cudaMemGetInfo), or the host's
// available physical memory.
Result<int64_t> free_device_bytes(Device device);

// Bytes the current GPU's default memory pool holds but no allocation uses: buffers freed back
// to it, which it keeps (base/buffer.cpp) and hands to the next stream-ordered allocations
// before asking the driver, so cudaMemGetInfo does not count them free. 0 on the host, in a
// build without CUDA, and on a GPU without memory pools.
Result<int64_t> idle_pool_bytes(Device device);

// Waits for the device work this thread has queued (its copies and ops), so that another
// thread may use what they wrote: the weights a server's request threads share, for one.
Status finish_device_work();

}  // namespace dsv4

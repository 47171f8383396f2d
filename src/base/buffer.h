// Owning memory: Buffer is raw bytes on the host or a CUDA device, released on destruction;
// Tensor is a Buffer plus the TensorView describing it. Move-only.
#pragma once

#include <cstddef>

#include "base/tensor.h"
#include "dsv4/status.h"

namespace dsv4 {

class Buffer {
 public:
  Buffer() = default;
  // Host memory is 64-byte aligned; device memory comes from the device's memory pool, ordered
  // on the calling thread's current stream (device_stream.h; buffer.cpp says why), or cudaMalloc
  // without pools.
  // Fails (never aborts) when the memory is not there: model sizes come from user configs.
  static Result<Buffer> allocate(size_t bytes, Device device);
  // Pinned host memory mapped into the GPU's address space (a kCuda buffer whose bytes stay in
  // host RAM): kernels read it through its device address over PCIe, and copy_tensor fills it
  // like any device buffer. For weights a GPU cannot hold (checkpoint/expert_offload.h).
  static Result<Buffer> allocate_mapped_host(size_t bytes);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

 private:
  void release();
  void* data_ = nullptr;
  size_t bytes_ = 0;
  Device device_ = Device::kCpu;
  bool pooled_ = false;       // device memory from the stream-ordered pool
  bool mapped_host_ = false;  // allocate_mapped_host's pinned host memory
};

class Tensor {
 public:
  Tensor() = default;
  static Result<Tensor> empty(DType dtype, Shape shape, Device device = Device::kCpu);
  // A kCuda tensor in Buffer::allocate_mapped_host's memory.
  static Result<Tensor> empty_mapped_host(DType dtype, Shape shape);
  // Host-only convenience for references and tests, where allocation failure is a bug.
  static Tensor host(DType dtype, Shape shape);

  const TensorView& view() const { return view_; }
  const Shape& shape() const { return view_.shape; }
  DType dtype() const { return view_.dtype; }
  Device device() const { return view_.device; }
  int64_t numel() const { return view_.numel(); }
  template <typename T>
  T* data_as() const {
    return view_.data_as<T>();
  }
  bool empty_tensor() const { return view_.data == nullptr; }

 private:
  Tensor(Buffer buffer, DType dtype, Shape shape);
  Buffer buffer_;
  TensorView view_;
};

// Copies between any two devices; same dtype and numel. Host-to-device and device-to-device
// copies are ordered on the calling thread's default stream, like the ops, and may still run
// when this returns (the host source is already staged); a copy to the host has finished.
Status copy_tensor(const TensorView& dst, const TensorView& src);

}  // namespace dsv4

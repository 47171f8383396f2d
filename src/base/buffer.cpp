#include "base/buffer.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#ifdef DSV4_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace dsv4 {

Result<Buffer> Buffer::allocate(size_t bytes, Device device) {
  Buffer buffer;
  buffer.bytes_ = bytes;
  buffer.device_ = device;
  if (bytes == 0) return buffer;
  if (device == Device::kCpu) {
    const size_t rounded = (bytes + 63) / 64 * 64;
    buffer.data_ = std::aligned_alloc(64, rounded);
    if (buffer.data_ == nullptr) {
      return resource_exhausted("host allocation of " + std::to_string(bytes) + " bytes failed");
    }
    return buffer;
  }
#ifdef DSV4_WITH_CUDA
  const cudaError_t err = cudaMalloc(&buffer.data_, bytes);
  if (err != cudaSuccess) {
    buffer.data_ = nullptr;
    return resource_exhausted("cudaMalloc of " + std::to_string(bytes) +
                              " bytes failed: " + cudaGetErrorString(err));
  }
  return buffer;
#else
  return unimplemented("this build of dsv4 has no CUDA support");
#endif
}

void Buffer::release() {
  if (data_ == nullptr) return;
  if (device_ == Device::kCpu) {
    std::free(data_);
  } else {
#ifdef DSV4_WITH_CUDA
    cudaFree(data_);  // errors at teardown have nowhere to go; the context may be gone already
#endif
  }
  data_ = nullptr;
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      device_(other.device_) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    device_ = other.device_;
  }
  return *this;
}

Result<Tensor> Tensor::empty(DType dtype, Shape shape, Device device) {
  for (int i = 0; i < shape.rank; ++i) {
    if (shape[i] < 0) return invalid_argument("negative dimension in shape " + shape.to_string());
  }
  const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
  DSV4_ASSIGN_OR_RETURN(Buffer buffer, Buffer::allocate(bytes, device));
  Tensor tensor;
  tensor.view_ = TensorView::contiguous(buffer.data(), dtype, device, shape);
  tensor.buffer_ = std::move(buffer);
  return tensor;
}

Tensor Tensor::host(DType dtype, Shape shape) {
  Result<Tensor> tensor = empty(dtype, shape, Device::kCpu);
  DSV4_CHECK(tensor.ok(), "%s", tensor.status().to_string().c_str());
  return std::move(tensor).value();
}

Status copy_tensor(const TensorView& dst, const TensorView& src) {
  if (dst.dtype != src.dtype || dst.numel() != src.numel()) {
    return invalid_argument("copy_tensor: " + std::string(dtype_name(src.dtype)) +
                            src.shape.to_string() + " into " + std::string(dtype_name(dst.dtype)) +
                            dst.shape.to_string());
  }
  if (!dst.is_contiguous() || !src.is_contiguous()) {
    return unimplemented("copy_tensor of non-contiguous views");
  }
  if (dst.device == Device::kCpu && src.device == Device::kCpu) {
    if (src.bytes()) std::memcpy(dst.data, src.data, src.bytes());
    return ok_status();
  }
#ifdef DSV4_WITH_CUDA
  const cudaError_t err = cudaMemcpy(dst.data, src.data, src.bytes(), cudaMemcpyDefault);
  if (err != cudaSuccess) return internal_error(std::string("cudaMemcpy: ") + cudaGetErrorString(err));
  return ok_status();
#else
  return unimplemented("this build of dsv4 has no CUDA support");
#endif
}

}  // namespace dsv4

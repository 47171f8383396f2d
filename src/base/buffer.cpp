#include "base/buffer.h"

#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "base/device_stream.h"

#ifdef DSV4_WITH_CUDA
#include <cuda_runtime_api.h>

#include "base/cuda_status.h"
#endif

namespace dsv4 {

#ifdef DSV4_WITH_CUDA
namespace {

// Device memory is stream-ordered on the thread's current stream, where every dsv4 op runs
// (device_stream.h): the model's per-step activations come from the device's memory pool and go
// back to it without the implicit device synchronisation of cudaFree, and the pool keeps what it
// was given (release threshold: never), so a decode step's allocations are reuses. Buffers are
// allocated, used and freed on one thread's stream (a generate call's activations and caches; a
// side chain's scratch on the side stream), or allocated once and only read elsewhere after a
// synchronous upload (weights). Devices without memory pools use cudaMalloc / cudaFree.
bool device_has_pool() {
  thread_local int device = -1;
  thread_local bool has_pool = false;
  int current = 0;
  if (cudaGetDevice(&current) != cudaSuccess) return false;
  if (current != device) {
    device = current;
    int supported = 0;
    has_pool = cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, current) ==
                   cudaSuccess &&
               supported != 0;
    cudaMemPool_t pool;
    if (has_pool && cudaDeviceGetDefaultMemPool(&pool, current) == cudaSuccess) {
      uint64_t keep_all = UINT64_MAX;
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all);
    }
  }
  return has_pool;
}

// DSV4_POISON_DEVICE_MEMORY=1 fills every new device buffer with 0xFF bytes (f32 NaN, integer
// −1) before its first use: a kernel that reads memory its step never wrote then yields NaN or a
// bad index instead of whatever the pool's last user left there, which can look right. A
// debugging aid for the CUDA tests; the memset runs in stream order, so graphs capture it too.
bool poison_device_memory() {
  static const bool poison = [] {
    const char* value = std::getenv("DSV4_POISON_DEVICE_MEMORY");
    return value != nullptr && std::strcmp(value, "1") == 0;
  }();
  return poison;
}

// A CUDA allocation's outcome: on failure `data` is cleared (the buffer owns nothing) and the
// error says what of how many bytes failed, and why. Every failure reads resource_exhausted,
// where cuda_status keeps it for cudaErrorMemoryAllocation: the server answers a failed
// allocation 503 and the batcher frees its prefix cache and tries again.
Status allocated(cudaError_t err, const char* what, size_t bytes, void*& data) {
  if (err == cudaSuccess) return ok_status();
  data = nullptr;
  // The runtime keeps the error for the thread's next cudaGetLastError, which is the next op's
  // launch check: it would abort there on an error that this Status already reports.
  (void)cudaGetLastError();
  return resource_exhausted(std::string(what) + " of " + std::to_string(bytes) +
                            " bytes failed: " + cudaGetErrorString(err));
}

}  // namespace
#endif

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
  buffer.pooled_ = device_has_pool();
  const auto stream = static_cast<cudaStream_t>(device_stream());
  const cudaError_t err = buffer.pooled_ ? cudaMallocAsync(&buffer.data_, bytes, stream)
                                         : cudaMalloc(&buffer.data_, bytes);
  DSV4_RETURN_IF_ERROR(allocated(err, "cudaMalloc", bytes, buffer.data_));
  if (poison_device_memory()) {
    // On failure, dropping `buffer` frees its memory.
    DSV4_RETURN_IF_ERROR(cuda_status(cudaMemsetAsync(buffer.data_, 0xFF, bytes, stream),
                                     "poisoning a device allocation failed"));
  }
  return buffer;
#else
  return unimplemented("this build of dsv4 has no CUDA support");
#endif
}

Result<Buffer> Buffer::allocate_mapped_host(size_t bytes) {
  Buffer buffer;
  buffer.bytes_ = bytes;
  buffer.device_ = Device::kCuda;
  buffer.mapped_host_ = true;
  if (bytes == 0) return buffer;
#ifdef DSV4_WITH_CUDA
  // Every 64-bit CUDA platform has unified addressing, so the host pointer is also the address
  // kernels use (cudaHostGetDevicePointer would return it unchanged), and the memory is pinned
  // for every GPU's context (portable, which unified addressing implies; said here so a copy to
  // another rank's GPU never depends on it).
  const cudaError_t err =
      cudaHostAlloc(&buffer.data_, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
  DSV4_RETURN_IF_ERROR(allocated(err, "pinned host allocation", bytes, buffer.data_));
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
    // Errors at teardown have nowhere to go; the context may be gone already.
    if (mapped_host_) {
      cudaFreeHost(data_);
    } else {
      if (!pooled_) {
        cudaFree(data_);
      } else if (!release_after_join(data_)) {
        cudaFreeAsync(data_, static_cast<cudaStream_t>(device_stream()));
      }
    }
#endif
  }
  data_ = nullptr;
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      device_(other.device_),
      pooled_(other.pooled_),
      mapped_host_(other.mapped_host_) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    device_ = other.device_;
    pooled_ = other.pooled_;
    mapped_host_ = other.mapped_host_;
  }
  return *this;
}

namespace {

Result<size_t> tensor_bytes(DType dtype, const Shape& shape) {
  for (int i = 0; i < shape.rank; ++i) {
    if (shape[i] < 0) return invalid_argument("negative dimension in shape " + shape.to_string());
  }
  // Multiplied with overflow checks: sizes come from configs and flags (a context of 2^62), and a
  // count that wrapped would allocate a small buffer for a huge tensor.
  int64_t numel = 1;
  bool over = false;
  for (int i = 0; i < shape.rank && !over; ++i) {
    over = __builtin_mul_overflow(numel, shape[i], &numel);
  }
  size_t bytes = 0;
  if (over || __builtin_mul_overflow(static_cast<size_t>(numel), dtype_size(dtype), &bytes)) {
    return resource_exhausted("shape " + shape.to_string() + " of " +
                              std::string(dtype_name(dtype)) + " is over the address space");
  }
  return bytes;
}

}  // namespace

Tensor::Tensor(Buffer buffer, DType dtype, Shape shape)
    : buffer_(std::move(buffer)),
      view_(TensorView::contiguous(buffer_.data(), dtype, buffer_.device(), shape)) {}

Result<Tensor> Tensor::empty(DType dtype, Shape shape, Device device) {
  DSV4_ASSIGN_OR_RETURN(const size_t bytes, tensor_bytes(dtype, shape));
  DSV4_ASSIGN_OR_RETURN(Buffer buffer, Buffer::allocate(bytes, device));
  return Tensor(std::move(buffer), dtype, shape);
}

Result<Tensor> Tensor::empty_mapped_host(DType dtype, Shape shape) {
  DSV4_ASSIGN_OR_RETURN(const size_t bytes, tensor_bytes(dtype, shape));
  DSV4_ASSIGN_OR_RETURN(Buffer buffer, Buffer::allocate_mapped_host(bytes));
  return Tensor(std::move(buffer), dtype, shape);
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
  // On the thread's current stream, in order with the ops: cudaMemcpy from pageable host memory
  // would first wait for all of the device's work, and the model uploads a step's positions and
  // indices layer by layer. A copy to the host waits for its data, since the caller reads it.
  const auto stream = static_cast<cudaStream_t>(device_stream());
  cudaError_t err = cudaMemcpyAsync(dst.data, src.data, src.bytes(), cudaMemcpyDefault, stream);
  if (err == cudaSuccess && dst.device == Device::kCpu) err = cudaStreamSynchronize(stream);
  return cuda_status(err, "cudaMemcpyAsync");
#else
  return unimplemented("this build of dsv4 has no CUDA support");
#endif
}

}  // namespace dsv4

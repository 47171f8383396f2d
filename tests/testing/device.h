// Moving test tensors between the host and the CUDA device (through copy_tensor, the one path
// every host<->device copy takes), and device outputs poisoned before a kernel writes them.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

#include "base/buffer.h"
#include "format/nvfp4.h"

namespace dsv4::testing {

inline Tensor to_device(const TensorView& host) {
  Result<Tensor> t = Tensor::empty(host.dtype, host.shape, Device::kCuda);
  DSV4_CHECK(t.ok(), "device allocation: %s", t.status().to_string().c_str());
  const Status copied = copy_tensor(t->view(), host);
  DSV4_CHECK(copied.ok(), "copy to device: %s", copied.to_string().c_str());
  return std::move(t).value();
}

// An optional tensor on the device: an empty one stays empty.
inline Tensor to_device_or_empty(const Tensor& host) {
  return host.empty_tensor() ? Tensor() : to_device(host.view());
}

// An NVFP4 stack on the device, scales (input_scale if any) and layout as they are.
inline format::Nvfp4Tensor to_device(const format::Nvfp4Tensor& host) {
  format::Nvfp4Tensor t;
  t.packed = to_device(host.packed.view());
  t.block_scale = to_device(host.block_scale.view());
  t.global_scale = to_device(host.global_scale.view());
  t.input_scale = to_device_or_empty(host.input_scale);
  t.scale_layout = host.scale_layout;
  return t;
}

// The same with the codes and block scales in mapped pinned host memory (expert offload: the
// kernels read them over PCIe), the per-matrix scales on the device.
inline format::Nvfp4Tensor to_mapped_host(const format::Nvfp4Tensor& host) {
  format::Nvfp4Tensor t = to_device(host);
  for (auto [from, to] :
       {std::pair{&host.packed, &t.packed}, {&host.block_scale, &t.block_scale}}) {
    Result<Tensor> mapped = Tensor::empty_mapped_host(from->dtype(), from->shape());
    DSV4_CHECK(mapped.ok(), "mapped host allocation: %s", mapped.status().to_string().c_str());
    const Status copied = copy_tensor(mapped->view(), from->view());
    DSV4_CHECK(copied.ok(), "copy to mapped host memory: %s", copied.to_string().c_str());
    *to = std::move(mapped).value();
  }
  return t;
}

inline Tensor to_host(const TensorView& device) {
  Tensor t = Tensor::host(device.dtype, device.shape);
  const Status copied = copy_tensor(t.view(), device);
  DSV4_CHECK(copied.ok(), "copy to host: %s", copied.to_string().c_str());
  return t;
}

// Every byte 0xff: NaN in f32, −1 in integers; a kernel that skips an element shows.
inline Tensor poisoned_host(DType dtype, Shape shape) {
  Tensor t = Tensor::host(dtype, shape);
  std::memset(t.view().data, 0xff, t.view().bytes());
  return t;
}
inline Tensor poisoned_device(DType dtype, Shape shape) {
  return to_device(poisoned_host(dtype, shape).view());
}

// The same bytes (bit-identical results, NaN included).
inline bool same_bytes(const TensorView& a, const TensorView& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.data, b.data, a.bytes()) == 0;
}

}  // namespace dsv4::testing

// One op input on both devices: a random host tensor and its device copy, for the CUDA-vs-CPU
// op tests. Every op is called through kernels/ops.h (so the device switch is tested too), once
// on the host copies and once on the device copies; outputs start poisoned on both sides.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "base/buffer.h"
#include "testing/compare.h"
#include "testing/device.h"
#include "testing/random.h"

namespace dsv4::testing {

struct OpPair {
  Tensor host;
  Tensor device;

  static OpPair of(Tensor host_tensor) {
    Tensor device_tensor = to_device(host_tensor.view());
    return {std::move(host_tensor), std::move(device_tensor)};
  }
  // An output: poisoned on both devices.
  static OpPair poisoned(DType dtype, Shape shape) { return of(poisoned_host(dtype, shape)); }
  // f32 values uniform in [lo, hi], never exactly zero.
  static OpPair uniform(SeededRng& rng, Shape shape, double lo = -1.0, double hi = 1.0) {
    Tensor t = Tensor::host(DType::kF32, shape);
    for (int64_t i = 0; i < t.numel(); ++i) {
      const auto v = static_cast<float>(rng.uniform(lo, hi));
      t.data_as<float>()[i] = v != 0.0f ? v : 0.5f;
    }
    return of(std::move(t));
  }
  template <typename T>
  static OpPair values(DType dtype, Shape shape, const std::vector<T>& values) {
    Tensor t = Tensor::host(dtype, shape);
    DSV4_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "OpPair::values: count");
    std::copy(values.begin(), values.end(), t.data_as<T>());
    return of(std::move(t));
  }

  const TensorView& h() const { return host.view(); }
  const TensorView& d() const { return device.view(); }
  // The device result, read back.
  Tensor result() const { return to_host(device.view()); }
};

// The device result of an f32 output against the host one, per row of the last dim.
inline double device_vs_host_error(const OpPair& out) {
  const Tensor got = out.result();
  const int64_t n_cols = out.host.shape()[out.host.shape().rank - 1];
  return max_row_rel_error(got.data_as<float>(), out.host.data_as<float>(),
                           out.host.numel() / n_cols, n_cols);
}

inline bool device_equals_host(const OpPair& out) {
  return same_bytes(out.result().view(), out.host.view());
}

}  // namespace dsv4::testing

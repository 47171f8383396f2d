// model::linear_pair against two model::linear calls on the same input, byte for byte, on one
// device (linear_test.cpp on the CPU, numerics_cuda_test.cpp on the GPU): FP8 weights in both
// profiles (the fast one quantizes x once for both), an FP8 weight beside an f32 one (two plain
// calls), a decode step's and a prefill's rows, each on fresh random weights and inputs; and
// both with x handed over already quantized (LinearInput), as the fused producers do.
//
// Dimension letters: T tokens, K input features, N output features.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>

#include "model/linear.h"
#include "testing/compare.h"
#include "testing/device.h"
#include "testing/fp8_weight.h"
#include "testing/random.h"

namespace dsv4::model::testing_linear {

// A random FP8 weight [N, K] on `device`.
inline checkpoint::LinearWeight random_fp8_linear(testing::SeededRng& rng, int64_t n, int64_t k,
                                                  Device device) {
  const testing::Fp8Weight fp8 = testing::random_fp8_weight(rng, n, k);
  Tensor codes = Tensor::host(DType::kF8E4M3, {n, k});
  std::copy(fp8.codes.begin(), fp8.codes.end(), codes.data_as<uint8_t>());
  Tensor scales = Tensor::host(DType::kF32, {(n + 127) / 128, fp8.scale_cols()});
  std::copy(fp8.scales.begin(), fp8.scales.end(), scales.data_as<float>());
  if (device == Device::kCpu) {
    checkpoint::LinearWeight w(std::move(codes));
    w.block_scales = std::move(scales);
    return w;
  }
  checkpoint::LinearWeight w(testing::to_device(codes.view()));
  w.block_scales = testing::to_device(scales.view());
  return w;
}

// A random f32 tensor on `device`.
inline Tensor random_f32(testing::SeededRng& rng, Shape shape, Device device) {
  Tensor t = Tensor::host(DType::kF32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.data_as<float>()[i] = static_cast<float>(rng.uniform(-2.0, 2.0));
  }
  return device == Device::kCpu ? std::move(t) : testing::to_device(t.view());
}

inline Tensor poisoned(Shape shape, Device device) {
  return device == Device::kCpu ? testing::poisoned_host(DType::kF32, shape)
                                : testing::poisoned_device(DType::kF32, shape);
}

inline void expect_pair_has_the_bits_of_two_linears(Device device) {
  testing::SeededRng rng;
  for (const auto& [t, n, k] : {std::tuple{1, 256, 512}, {5, 384, 256}, {40, 128, 1024}}) {
    for (const Numerics numerics : {Numerics::kExact, Numerics::kFast}) {
      for (const bool both_fp8 : {true, false}) {
        SCOPED_TRACE(std::to_string(t) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                     (numerics == Numerics::kFast ? " fast" : " exact") +
                     (both_fp8 ? "" : ", b f32"));
        const Tensor x = random_f32(rng, {t, k}, device);
        const checkpoint::LinearWeight a = random_fp8_linear(rng, n, k, device);
        const checkpoint::LinearWeight b =
            both_fp8 ? random_fp8_linear(rng, n, k, device)
                     : checkpoint::LinearWeight(random_f32(rng, {n, k}, device));
        const Tensor want_a = poisoned({t, n}, device), want_b = poisoned({t, n}, device);
        const Tensor got_a = poisoned({t, n}, device), got_b = poisoned({t, n}, device);
        ASSERT_TRUE(linear(x.view(), a, want_a.view(), numerics).ok());
        ASSERT_TRUE(linear(x.view(), b, want_b.view(), numerics).ok());
        const Status status = linear_pair(x.view(), {a, got_a.view()}, {b, got_b.view()}, numerics);
        ASSERT_TRUE(status.ok()) << status.to_string();
        EXPECT_TRUE(testing::same_bytes(testing::to_host(got_a.view()).view(),
                                        testing::to_host(want_a.view()).view()));
        EXPECT_TRUE(testing::same_bytes(testing::to_host(got_b.view()).view(),
                                        testing::to_host(want_b.view()).view()));
        // x as a producer hands it over, quantized already (LinearInput): the FP8 GEMMs read
        // those bytes instead of quantizing x, the others x itself; the same bits either way.
        const Result<Fp8Room> room = fp8_room(t, k, device, Numerics::kFast, {&a});
        ASSERT_TRUE(room.ok() && !room->empty());
        ASSERT_TRUE(kernels::quantize_activation_fp8(x.view(), room->view()).ok());
        const LinearInput quantized(x.view(), room->view());
        const Tensor q_a = poisoned({t, n}, device), q_b = poisoned({t, n}, device);
        ASSERT_TRUE(linear(quantized, a, q_a.view(), numerics).ok());
        ASSERT_TRUE(linear_pair(quantized, {a, got_a.view()}, {b, q_b.view()}, numerics).ok());
        for (const Tensor* got : {&q_a, &got_a}) {
          EXPECT_TRUE(testing::same_bytes(testing::to_host(got->view()).view(),
                                          testing::to_host(want_a.view()).view()));
        }
        EXPECT_TRUE(testing::same_bytes(testing::to_host(q_b.view()).view(),
                                        testing::to_host(want_b.view()).view()));
      }
    }
  }
}

}  // namespace dsv4::model::testing_linear

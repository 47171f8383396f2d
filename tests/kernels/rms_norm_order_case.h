// A row whose rms_norm result depends on the order of its sum of squares (ops.h: the lane
// order), for the tests that pin that order on the CPU and on CUDA. Five elements' squares sum
// to D·(3 + 2^-23) exactly, whose mean is the midpoint between the f32 values 3 and 3 + 2^-22;
// every other element's square is far below the float64 ulp of that sum. Added one by one to
// it (a sequential sum), each tiny square is lost and the mean rounds to even, down to 3; added
// to each other first (their lanes' subtrees), they survive and the mean rounds up. With
// kRmsNormOrderEps that ulp survives the square root and the reciprocal, so the two orders give
// different bits in every element.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace dsv4::testing {

inline constexpr float kRmsNormOrderEps = 5e-7f;

// D a power of 4 of at least 1024 (so sqrt(D) / 32 is an exact power of two).
inline std::vector<float> rms_norm_order_row(int64_t d) {
  const auto k = static_cast<float>(std::sqrt(static_cast<double>(d)) / 32.0);
  std::vector<float> row(static_cast<size_t>(d), k * 32.0f * 0x1p-30f);
  row[0] = row[1] = row[2] = 32.0f * k;  // 3·D
  row[3] = row[4] = 0x1p-7f * k;         // D·2^-23
  return row;
}

}  // namespace dsv4::testing

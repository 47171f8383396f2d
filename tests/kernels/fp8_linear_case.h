// Random operands of the FP8 linear and their float64 evaluation, shared by the CPU test
// (fp8_linear_test.cpp) and the CUDA test (fp8_linear_cuda_test.cpp).
//
// Dimension letters: T tokens, N output features, K input features, Nb = ceil(N/128),
// Kb = ceil(K/128), G groups of R outputs.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/buffer.h"
#include "base/float_convert.h"
#include "format/fp8_block.h"
#include "kernels/ops.h"
#include "testing/random.h"

namespace dsv4::testing {

inline int64_t fp8_group_count(int64_t k) {
  return (k + format::kFp8ActivationGroup - 1) / format::kFp8ActivationGroup;
}

// Storage of one Fp8Activation [T, K]: on the host, or on the device poisoned (all-ones bytes).
struct Fp8Storage {
  Tensor values, scales;
  kernels::Fp8Activation view() const { return {values.view(), scales.view()}; }
};

inline Fp8Storage fp8_host_storage(int64_t n_rows, int64_t n_cols) {
  return {Tensor::host(DType::kF8E4M3, {n_rows, n_cols}),
          Tensor::host(DType::kF32, {n_rows, fp8_group_count(n_cols)})};
}

// x f32 [T, K] whose 128-column groups have magnitudes 2^-6 .. 2^6 apart, so their scales differ.
inline Tensor fp8_random_activation(SeededRng& rng, int64_t n_rows, int64_t n_cols) {
  Tensor x = Tensor::host(DType::kF32, {n_rows, n_cols});
  for (int64_t t = 0; t < n_rows; ++t) {
    double magnitude = 1.0;
    for (int64_t k = 0; k < n_cols; ++k) {
      if (k % format::kFp8ActivationGroup == 0) magnitude = std::exp2(rng.uniform(-6.0, 6.0));
      x.data_as<float>()[t * n_cols + k] = static_cast<float>(rng.uniform(-1.0, 1.0) * magnitude);
    }
  }
  return x;
}

// An FP8 block weight [N, K] with rows `row_stride` bytes apart: random finite e4m3 codes
// (never the NaN codes 0x7f, 0xff) and random block scales, powers of two as the V4 checkpoints'
// E8M0 except every third, an arbitrary f32 (the Flash-Base checkpoints' f32 scales).
struct Fp8RandomWeight {
  Tensor values;  // f8_e4m3 [N, row_stride]
  Tensor scales;  // f32 [Nb, Kb]
  int64_t n_rows = 0, n_cols = 0, row_stride = 0;

  format::Fp8BlockView view(const Tensor& values_on, const Tensor& scales_on) const {
    return {values_on.data_as<const uint8_t>(),
            scales_on.data_as<const float>(),
            n_rows,
            n_cols,
            row_stride,
            values_on.view().device};
  }
};

inline Fp8RandomWeight fp8_random_weight(SeededRng& rng, int64_t n_rows, int64_t n_cols,
                                         int64_t row_stride) {
  Fp8RandomWeight w;
  w.n_rows = n_rows, w.n_cols = n_cols, w.row_stride = row_stride;
  w.values = Tensor::host(DType::kF8E4M3, {n_rows, row_stride});
  for (int64_t i = 0; i < n_rows * row_stride; ++i) {
    uint8_t code = static_cast<uint8_t>(rng.uniform_int(0, 255));
    if ((code & 0x7f) == 0x7f) code &= 0xfe;
    w.values.data_as<uint8_t>()[i] = code;
  }
  const int64_t nb = (n_rows + format::kFp8WeightBlock - 1) / format::kFp8WeightBlock;
  const int64_t kb = fp8_group_count(n_cols);
  w.scales = Tensor::host(DType::kF32, {nb, kb});
  for (int64_t i = 0; i < nb * kb; ++i) {
    const double exponent = static_cast<double>(rng.uniform_int(-12, -4));
    w.scales.data_as<float>()[i] = static_cast<float>(
        i % 3 == 2 ? std::exp2(exponent) * rng.uniform(1.0, 2.0) : std::exp2(exponent));
  }
  return w;
}

// y64[t, n] = Σ_k (a code · a scale) · (w code · w scale) in float64 (exact products, one
// rounding per add at 2^-53), and Σ_k |that term|, the measure the tolerances use.
struct Fp8Reference {
  std::vector<double> y;        // [T, N]
  std::vector<double> abs_sum;  // [T, N]
};

inline Fp8Reference fp8_reference(const uint8_t* a_values, const float* a_scales, int64_t n_rows,
                                  const Fp8RandomWeight& w) {
  const int64_t k_groups = fp8_group_count(w.n_cols);
  Fp8Reference r;
  r.y.assign(n_rows * w.n_rows, 0.0);
  r.abs_sum.assign(n_rows * w.n_rows, 0.0);
  const auto* w_values = w.values.data_as<const uint8_t>();
  const auto* w_scales = w.scales.data_as<const float>();
  // Each operand decoded once (the products then a plain dot product: shapes of 10⁹ terms take
  // seconds, not minutes).
  std::vector<double> a(n_rows * w.n_cols), b(w.n_rows * w.n_cols);
  for (int64_t t = 0; t < n_rows; ++t) {
    for (int64_t k = 0; k < w.n_cols; ++k) {
      a[t * w.n_cols + k] = double{e4m3_to_float(a_values[t * w.n_cols + k])} *
                            a_scales[t * k_groups + k / format::kFp8ActivationGroup];
    }
  }
  for (int64_t n = 0; n < w.n_rows; ++n) {
    for (int64_t k = 0; k < w.n_cols; ++k) {
      b[n * w.n_cols + k] =
          double{e4m3_to_float(w_values[n * w.row_stride + k])} *
          w_scales[(n / format::kFp8WeightBlock) * k_groups + k / format::kFp8ActivationGroup];
    }
  }
  for (int64_t t = 0; t < n_rows; ++t) {
    const double* a_row = &a[t * w.n_cols];
    for (int64_t n = 0; n < w.n_rows; ++n) {
      const double* b_row = &b[n * w.n_cols];
      double sum = 0.0, abs_sum = 0.0;
      for (int64_t k = 0; k < w.n_cols; ++k) {
        sum += a_row[k] * b_row[k];
        abs_sum += std::fabs(a_row[k] * b_row[k]);
      }
      r.y[t * w.n_rows + n] = sum;
      r.abs_sum[t * w.n_rows + n] = abs_sum;
    }
  }
  return r;
}

// Group g of a block-diagonal call (kernels::block_diagonal_linear_fp8) as a plain linear_fp8:
// the activation's columns [g·K, (g+1)·K) and their scales copied dense, and the weight's rows
// [g·R, (g+1)·R) with their block scales (K and R multiples of 128, as the op requires).
struct Fp8Group {
  Fp8Storage a;       // [T, K] and [T, Kb]
  Fp8RandomWeight w;  // [R, K]
};

inline Fp8Group fp8_group(const uint8_t* a_values, const float* a_scales, int64_t n_rows,
                          int64_t n_groups, const Fp8RandomWeight& w, int64_t g) {
  const int64_t k = w.n_cols, kb = fp8_group_count(k), r = w.n_rows / n_groups;
  Fp8Group group{fp8_host_storage(n_rows, k), {}};
  for (int64_t t = 0; t < n_rows; ++t) {
    std::memcpy(group.a.values.data_as<uint8_t>() + t * k, a_values + t * n_groups * k + g * k, k);
    std::memcpy(group.a.scales.data_as<float>() + t * kb, a_scales + t * n_groups * kb + g * kb,
                4 * kb);
  }
  group.w.n_rows = r, group.w.n_cols = k, group.w.row_stride = w.row_stride;
  group.w.values = Tensor::host(DType::kF8E4M3, {r, w.row_stride});
  std::memcpy(group.w.values.data_as<uint8_t>(),
              w.values.data_as<const uint8_t>() + g * r * w.row_stride, r * w.row_stride);
  const int64_t rb = r / format::kFp8WeightBlock;
  group.w.scales = Tensor::host(DType::kF32, {rb, kb});
  std::memcpy(group.w.scales.data_as<float>(), w.scales.data_as<const float>() + g * rb * kb,
              4 * rb * kb);
  return group;
}

// max over outputs of |y - y64| / Σ|terms| (y f32 [T, N] with rows y_stride apart).
inline double fp8_sum_rel_error(const float* y, int64_t y_stride, const Fp8Reference& r,
                                int64_t n_rows, int64_t n_cols) {
  double worst = 0.0;
  for (int64_t t = 0; t < n_rows; ++t) {
    for (int64_t n = 0; n < n_cols; ++n) {
      const double denom = r.abs_sum[t * n_cols + n];
      const double err = std::fabs(double{y[t * y_stride + n]} - r.y[t * n_cols + n]);
      const double rel = denom > 0.0 ? err / denom : err;
      if (std::isnan(rel)) return rel;
      if (rel > worst) worst = rel;
    }
  }
  return worst;
}

}  // namespace dsv4::testing

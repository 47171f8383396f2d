// The error measure dsv4 verify reports and the tests bound: the largest per-row relative
// error ‖a_r − b_r‖ / ‖b_r‖ (2-norms, in double) over a row-major [n_rows, n_cols] pair, b the
// reference. A zero reference row counts ‖a_r‖; NaN anywhere makes the result NaN.
#pragma once

#include <cmath>
#include <cstdint>

namespace dsv4 {

template <typename A, typename B>
double max_row_rel_error(const A* a, const B* b, int64_t n_rows, int64_t n_cols) {
  double worst = 0.0;
  for (int64_t r = 0; r < n_rows; ++r) {
    double diff = 0.0, ref = 0.0;
    for (int64_t c = 0; c < n_cols; ++c) {
      const double x = static_cast<double>(a[r * n_cols + c]);
      const double y = static_cast<double>(b[r * n_cols + c]);
      diff += (x - y) * (x - y);
      ref += y * y;
    }
    const double error = ref > 0.0 ? std::sqrt(diff / ref) : std::sqrt(diff);
    if (!(error <= worst)) worst = error;  // NaN propagates: a NaN row is the worst row
  }
  return worst;
}

}  // namespace dsv4

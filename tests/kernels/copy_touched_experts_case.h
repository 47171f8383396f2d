// A random case of copy_touched_experts (kernels/ops.h): four regions of E experts' bytes, the
// copies' prior bytes, and an active list of a random subset (the shared expert's group E
// among them or not), drawn afresh each run.
//
// Dimension letters: E routed experts.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include "base/buffer.h"
#include "kernels/ops.h"
#include "testing/random.h"

namespace dsv4::kernels::touched_test {

struct TouchedCase {
  int64_t n_experts = 0;
  std::array<Tensor, 4> from, to;  // u8 [E, rows, cols]: w13's codes, block scales, w2's
  Tensor active;                   // i32 [E+2]
  std::vector<bool> listed;        // [E] whether expert e is in the list

  static ExpertBulkCopies bulk(const std::array<Tensor, 4>& t) {
    return {t[0].view(), t[1].view(), t[2].view(), t[3].view()};
  }
};

inline Tensor random_bytes(dsv4::testing::SeededRng& rng, Shape shape) {
  Tensor t = Tensor::host(DType::kU8, shape);
  std::uniform_int_distribution<uint32_t> byte(0, 255);
  for (int64_t i = 0; i < t.numel(); ++i) {
    t.data_as<uint8_t>()[i] = static_cast<uint8_t>(byte(rng.engine()));
  }
  return t;
}

// n_listed experts of E (all of them when n_listed ≥ E), each region's expert slice up to
// max_rows rows of 16, 32 or 48 bytes.
inline TouchedCase random_touched_case(dsv4::testing::SeededRng& rng, int64_t n_experts,
                                       int64_t n_listed, int64_t max_rows = 4) {
  TouchedCase c;
  c.n_experts = n_experts;
  for (int r = 0; r < 4; ++r) {
    const Shape shape{n_experts, rng.uniform_int(1, max_rows), 16 * rng.uniform_int(1, 3)};
    c.from[r] = random_bytes(rng, shape);
    c.to[r] = random_bytes(rng, shape);
  }
  c.listed.assign(n_experts, false);
  int64_t n_marked = 0;
  while (n_marked < std::min(n_listed, n_experts)) {
    const int64_t e = rng.uniform_int(0, n_experts - 1);
    if (!c.listed[e]) c.listed[e] = true, ++n_marked;
  }
  c.active = Tensor::host(DType::kI32, {n_experts + 2});
  int32_t* list = c.active.data_as<int32_t>();
  for (int64_t i = 0; i < n_experts + 2; ++i) list[i] = -1;  // past the count: never read
  int32_t n = 0;
  for (int64_t e = 0; e < n_experts; ++e) {
    if (c.listed[e]) list[n++] = static_cast<int32_t>(e);
  }
  if (rng.uniform_int(0, 1) == 1) list[n++] = static_cast<int32_t>(n_experts);  // shared group
  list[n_experts + 1] = n;
  return c;
}

}  // namespace dsv4::kernels::touched_test

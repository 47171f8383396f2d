// Random inputs of one mHC site's pre side (kernels::hc_pre_norm and hc_pre_norm_fp8) on both
// devices, shared by the CUDA tests of the fused mHC ops (dense_ops_cuda_test.cpp) and of the
// FP8 producers (fp8_producers_cuda_test.cpp): 20 Sinkhorn iterations, eps 1e-6 for both.
//
// Dimension letters: T tokens, M streams, D model width.
#pragma once

#include <cstdint>

#include "kernels/cuda_op_pair.h"
#include "kernels/ops.h"

namespace dsv4::testing {

struct HcPreNormInputs {
  OpPair mixes, scale, base, streams, weight;

  HcPreNormInputs(SeededRng& rng, int64_t t, int64_t m, int64_t d)
      : mixes(OpPair::uniform(rng, {t, (2 + m) * m}, -2.0, 2.0)),
        scale(OpPair::uniform(rng, {3}, 0.1, 2.0)),
        base(OpPair::uniform(rng, {(2 + m) * m})),
        streams(OpPair::uniform(rng, {t, m, d}, -3.0, 3.0)),
        weight(OpPair::uniform(rng, {d})) {}

  // The op on the host or device copies, writing the site's mixes and y there.
  kernels::HcPreNormParams params(bool device, const OpPair& pre, const OpPair& post,
                                  const OpPair& comb, const OpPair& y) const {
    const auto v = [&](const OpPair& p) { return device ? p.d() : p.h(); };
    return {v(mixes),   v(scale),  v(base), 20,  1e-6f, {v(pre), v(post), v(comb)},
            v(streams), v(weight), 1e-6f,   v(y)};
  }
};

}  // namespace dsv4::testing

// A small DeepSeek-V4 MoE block for the expert-parallel tests: random router, NVFP4 routed and
// shared experts, random tokens, and kernels::moe_ffn's output on all of them.
//
// Dimension letters: T tokens (all ranks), D model width, F expert width, E experts, K top-k,
// V vocabulary of the hash table.
#pragma once

#include <cstdint>

#include "base/buffer.h"
#include "kernels/ops.h"
#include "testing/random.h"

namespace dsv4::kernels::ep {

enum class Routing {
  kScore,      // top-K of sqrt(softplus(x · gateᵀ)) + bias
  kSkewed,     // hash routing onto the first max(K, E/4) experts only: later ranks get nothing
  kOneExpert,  // hash routing with expert E-1 in every token's slot 0
};

struct LayerShape {
  int64_t hidden = 64, width = 32, n_experts = 16, top_k = 4, vocab = 50;
};

class MoeLayer {
 public:
  MoeLayer(testing::SeededRng& rng, const LayerShape& shape, int64_t n_tokens, Routing routing);

  const MoeWeightsView& weights() const { return weights_; }
  const MoeConfig& config() const { return config_; }
  int64_t n_tokens() const { return n_tokens_; }
  TensorView x(int64_t begin, int64_t end) const { return x_.view().rows(begin, end); }
  TensorView token_ids(int64_t begin, int64_t end) const {
    return token_ids_.view().rows(begin, end);
  }
  // f32 [T, D]: kernels::moe_ffn on all T tokens at once.
  const Tensor& moe_ffn_out() const { return reference_; }

 private:
  void make_hash_table(testing::SeededRng& rng, Routing routing);

  const LayerShape shape_;
  const int64_t n_tokens_;
  format::Nvfp4Tensor w13_, w2_, shared_w13_, shared_w2_;
  Tensor gate_, bias_, tid2eid_, x_, token_ids_, reference_;
  MoeWeightsView weights_;
  MoeConfig config_;
};

}  // namespace dsv4::kernels::ep

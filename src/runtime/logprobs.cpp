#include "runtime/logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "runtime/sampler.h"

namespace dsv4::runtime {

TokenLogprob token_logprob(std::span<const float> logits, int64_t token, int64_t n_top) {
  const float largest = logits[static_cast<size_t>(argmax(logits))];  // the vector scan
  double sum = 0.0;
  for (const float x : logits) sum += std::exp(static_cast<double>(x) - largest);
  const double log_sum = largest + std::log(sum);
  const auto logprob = [&](int64_t id) {
    return static_cast<float>(logits[static_cast<size_t>(id)] - log_sum);
  };
  TokenLogprob out{token, logprob(token), {}};
  if (n_top <= 0) return out;  // the token's alone: no ranking of the vocabulary
  const auto n = std::min<int64_t>(n_top, static_cast<int64_t>(logits.size()));
  std::vector<int64_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), int64_t{0});
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int64_t a, int64_t b) {
    const float la = logits[static_cast<size_t>(a)], lb = logits[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  });
  for (int64_t i = 0; i < n; ++i) out.top.emplace_back(ids[i], logprob(ids[i]));
  return out;
}

}  // namespace dsv4::runtime
